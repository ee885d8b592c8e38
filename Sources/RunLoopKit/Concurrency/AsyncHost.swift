/// The resident thread on whose loop the library's async operations wait without holding a
/// thread of their callers: the reply ports of async `sendRequest` calls, and the sockets of
/// proxies whose async senders wait for room. Started on first use; it lives as long as the
/// process.
enum AsyncHost {
    static let thread = ResidentThread(name: "RunLoopKit async")
}
