import Distributed
import RunLoopKitDistributed

/// The example service as a distributed actor: what `Wire.request` asks of example-daemon's
/// port, as a typed call (`example-client --distributed`). example-daemon publishes it as
/// `Wire.actorName(for:)` of its service's name, under the same access policy; its calls run
/// on the cooperative pool, beside the port's workers.
public distributed actor ExampleService {
    public typealias ActorSystem = PortActorSystem

    /// The most rounds one call may ask for: a caller cannot tie up a thread of the pool for
    /// as long as it likes.
    let maxRounds: UInt64

    public init(actorSystem: PortActorSystem, maxRounds: UInt64 = Wire.defaultMaxRounds) {
        self.actorSystem = actorSystem
        self.maxRounds = maxRounds
    }

    /// `rounds` rounds of the service's work over `key` (`Wire.work`); throws
    /// `ExampleServiceError.tooManyRounds` (to the caller, typed) above the service's bound.
    public distributed func work(key: UInt64, rounds: UInt64) throws -> UInt64 {
        guard rounds <= maxRounds else { throw ExampleServiceError.tooManyRounds(requested: rounds, limit: maxRounds) }
        return Wire.work(key: key, rounds: rounds)
    }
}

/// What `ExampleService` throws to its callers (Codable, so the caller gets it as it is).
public enum ExampleServiceError: Error, Codable, Equatable, CustomStringConvertible {
    case tooManyRounds(requested: UInt64, limit: UInt64)

    public var description: String {
        switch self {
        case .tooManyRounds(let requested, let limit): "\(requested) rounds asked, at most \(limit) served"
        }
    }
}

extension Wire {
    /// The name `ExampleService` is published under beside the service port named `name`.
    public static func actorName(for name: String) -> String {
        name + ".actor"
    }

    /// `max_rounds` when none is configured: tens of milliseconds of work in a release build.
    public static let defaultMaxRounds: UInt64 = 50_000_000
}
