/// Integers as Redis reads them (`string2ll` in its util.c), so that every argument and stored
/// value a client sends is accepted or refused exactly as redis-server does: optional `-`, no
/// `+`, no leading zeros (except "0" itself), no spaces, fewer than 21 bytes, within Int64.
enum RedisInteger {
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        let count = bytes.count
        guard count > 0, count < 21 else { return nil }
        if count == 1 && bytes[0] == UInt8(ascii: "0") { return 0 }
        var index = 0
        let negative = bytes[0] == UInt8(ascii: "-")
        if negative {
            index = 1
            guard count > 1 else { return nil }
        }
        guard bytes[index] >= UInt8(ascii: "1") && bytes[index] <= UInt8(ascii: "9") else { return nil }
        var magnitude = UInt64(bytes[index] - UInt8(ascii: "0"))
        index += 1
        while index < count {
            let digit = bytes[index]
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            guard !overflow1 && !overflow2 else { return nil }
            magnitude = sum
            index += 1
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }
}
