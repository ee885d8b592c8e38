// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .library(name: "RunLoopKitSystemd", targets: ["RunLoopKitSystemd"]),
        .executable(name: "example-daemon", targets: ["ExampleDaemon"]),
        .executable(name: "example-client", targets: ["ExampleClient"]),
        .executable(name: "Benchmarks", targets: ["Benchmarks"]),
    ],
    dependencies: [
        // Benchmarks only: SwiftNIO is one of the peers we measure against.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // The few things Swift cannot express: CMSG_* macros, futex and epoll_pwait2 entry points.
        .target(name: "CRunLoopKit"),
        .target(
            name: "RunLoopKit",
            dependencies: ["CRunLoopKit"]
        ),

        // libsystemd, found through pkg-config; Debian/Ubuntu provider: libsystemd-dev.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .target(
            name: "RunLoopKitSystemd",
            dependencies: ["RunLoopKit", "CSystemd"]
        ),
        // The example service: its messages, the daemon and the client.
        .target(
            name: "ExampleWire",
            dependencies: ["RunLoopKit"],
            path: "Examples/ExampleWire"
        ),
        .executableTarget(
            name: "ExampleDaemon",
            dependencies: ["RunLoopKit", "RunLoopKitSystemd", "ExampleWire"],
            path: "Examples/ExampleDaemon",
            exclude: ["example-daemon.service", "example-daemon.socket"]
        ),
        .executableTarget(
            name: "ExampleClient",
            dependencies: ["RunLoopKit", "ExampleWire"],
            path: "Examples/ExampleClient"
        ),

        // Benchmarks: C peers (eventfd, ring + eventfd, socketpair, sd-event) and the Swift harness.
        .target(
            name: "CBenchmarkPeers",
            dependencies: ["CSystemd"],
            path: "Benchmarks/CBenchmarkPeers"
        ),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                "RunLoopKit",
                "CBenchmarkPeers",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/Benchmarks"
        ),

        .testTarget(
            name: "RunLoopKitTests",
            dependencies: ["RunLoopKit", "LoopHost"]
        ),
        // A program whose main thread runs ThreadRunLoop.main, for the main-dispatch-queue tests
        // (the test runner owns the test process's main thread).
        .executableTarget(
            name: "LoopHost",
            dependencies: ["RunLoopKit"],
            path: "Tests/LoopHost"
        ),
        // Cross-process transport test peers: a Swift program using RunLoopKit, and an
        // independent C implementation of Protocols/port-message-frame.md.
        .executableTarget(
            name: "PortPeer",
            dependencies: ["RunLoopKit"],
            path: "Tests/PortPeer"
        ),
        .executableTarget(
            name: "PortPeerC",
            path: "Tests/PortPeerC"
        ),
        .testTarget(
            name: "RunLoopKitTransportTests",
            dependencies: ["RunLoopKit", "PortPeer", "PortPeerC"]
        ),
        // libFuzzer targets (Fuzz/README.md). `.ci/fuzz` builds them with
        // `-sanitize=fuzzer,address -DRUNLOOPKIT_FUZZING`; in any other build each is a program
        // that runs its property checks once over the inputs it is given (a corpus, a crash).
        .target(name: "CFuzzSupport", path: "Fuzz/CFuzzSupport"),
        .target(name: "FuzzSupport", dependencies: ["RunLoopKit", "CFuzzSupport"], path: "Fuzz/FuzzSupport"),
        .executableTarget(name: "FuzzFrameDecoder", dependencies: ["RunLoopKit", "FuzzSupport"],
                          path: "Fuzz/FuzzFrameDecoder"),
        .executableTarget(name: "FuzzFrameReceive", dependencies: ["RunLoopKit", "FuzzSupport", "CFuzzSupport"],
                          path: "Fuzz/FuzzFrameReceive"),
        .executableTarget(name: "FuzzHandshake", dependencies: ["RunLoopKit", "FuzzSupport", "CFuzzSupport"],
                          path: "Fuzz/FuzzHandshake"),

        .testTarget(
            name: "RunLoopKitSystemdTests",
            dependencies: ["RunLoopKit", "RunLoopKitSystemd", "ExampleDaemon", "ExampleClient"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
