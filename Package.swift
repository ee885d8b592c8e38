// swift-tools-version: 6.1
import PackageDescription

/// Set (to anything) for builds that need only the core targets and their tests — the sanitizer
/// runs of .ci/run: the benchmarks and SwiftNIO, the gRPC bridge, its tests and gRPC, NIO HTTP/2
/// and NIOSSL are then left out.
let coreOnly = Context.environment["RUNLOOPKIT_CORE_ONLY"] != nil

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .library(name: "RunLoopKitSystemd", targets: ["RunLoopKitSystemd"]),
        .library(name: "RunLoopKitServiceLifecycle", targets: ["RunLoopKitServiceLifecycle"]),
        .library(name: "RunLoopKitMetrics", targets: ["RunLoopKitMetrics"]),
        .executable(name: "example-daemon", targets: ["ExampleDaemon"]),
        .executable(name: "example-client", targets: ["ExampleClient"]),
    ],
    dependencies: [
        // The adapters' products only: a package that uses the RunLoopKit product builds neither.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Documentation only: `swift package generate-documentation` (CI builds the DocC catalogs).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
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
        // Adapters to the Swift server ecosystem, each its own product.
        .target(
            name: "RunLoopKitServiceLifecycle",
            dependencies: [
                "RunLoopKit",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "RunLoopKitMetrics",
            dependencies: [
                "RunLoopKit",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
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
        .testTarget(
            name: "RunLoopKitTests",
            dependencies: ["RunLoopKit", "LoopHost", "ResidentThreadsExample", "PortsAndMessagesExample",
                           "CrossProcessExample", "ConcurrencyExample", "ComingFromCFExample"]
        ),
        // The DocC articles' examples, each a complete program that its article shows verbatim;
        // DocumentationExampleTests checks that the two match and runs the program.
        .executableTarget(name: "ComingFromCFExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/ComingFromCF"),
        .executableTarget(name: "ResidentThreadsExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/ResidentThreads"),
        .executableTarget(name: "PortsAndMessagesExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/PortsAndMessages"),
        .executableTarget(name: "CrossProcessExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/CrossProcess"),
        .executableTarget(name: "ConcurrencyExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/Concurrency"),
        .executableTarget(name: "SystemdDaemonExample", dependencies: ["RunLoopKit", "RunLoopKitSystemd"],
                          path: "Tests/DocExamples/SystemdDaemon"),
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
            dependencies: ["RunLoopKit", "RunLoopKitSystemd", "ExampleDaemon", "ExampleClient",
                           "SystemdDaemonExample"]
        ),
        // A daemon whose main thread runs ThreadRunLoop.main inside a ServiceGroup, for the
        // graceful-shutdown tests (they send it SIGTERM).
        .executableTarget(
            name: "ServiceHost",
            dependencies: ["RunLoopKit", "RunLoopKitServiceLifecycle",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            path: "Tests/ServiceHost"
        ),
        .testTarget(
            name: "RunLoopKitServiceLifecycleTests",
            dependencies: ["RunLoopKit", "RunLoopKitServiceLifecycle", "ServiceHost",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle")]
        ),
        .testTarget(
            name: "RunLoopKitMetricsTests",
            dependencies: ["RunLoopKit", "RunLoopKitMetrics",
                           .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The benchmarks, with SwiftNIO, one of the peers they measure against.
if !coreOnly {
    package.products.append(.executable(name: "Benchmarks", targets: ["Benchmarks"]))
    package.dependencies.append(.package(url: "https://github.com/apple/swift-nio", from: "2.101.2"))
    package.targets += [
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
    ]
}

// The gRPC bridge: its product, targets and packages, and the examples' `--grpc` flag.
if !coreOnly {
    package.products.append(.library(name: "RunLoopKitGRPC", targets: ["RunLoopKitGRPC"]))
    package.products.append(.executable(name: "GRPCBridgeBenchmark", targets: ["GRPCBridgeBenchmark"]))
    package.dependencies += [
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ]
    package.targets += [
        .target(
            name: "RunLoopKitGRPC",
            dependencies: [
                "RunLoopKit",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // The xhost benchmark: the bridge beside grpc-swift's own bidirectional echo.
        .executableTarget(
            name: "GRPCBridgeBenchmark",
            dependencies: [
                "RunLoopKit", "RunLoopKitGRPC", "CBenchmarkPeers",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
            ],
            path: "Benchmarks/GRPCBridge"
        ),
        // The other process of the bridge tests: serves or calls a port over gRPC.
        .executableTarget(
            name: "GRPCPortPeer",
            dependencies: ["RunLoopKit", "RunLoopKitGRPC"],
            path: "Tests/GRPCPortPeer"
        ),
        .testTarget(
            name: "RunLoopKitGRPCTests",
            dependencies: [
                "RunLoopKit", "RunLoopKitGRPC", "GRPCPortPeer",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ]
    for target in package.targets where ["ExampleDaemon", "ExampleClient"].contains(target.name) {
        target.dependencies.append("RunLoopKitGRPC")
        target.swiftSettings = (target.swiftSettings ?? []) + [.define("RUNLOOPKIT_GRPC")]
    }
}

