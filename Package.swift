// swift-tools-version: 6.1
import PackageDescription

// What a dependent fetches (DESIGN §1): a package that uses only the `RunLoopKit` or
// `RunLoopKitSystemd` product resolves and clones no other package. SwiftPM resolves every
// dependency reachable from a declared product, so:
// - each adapter that needs another package reaches it only through its trait (none is on by
//   default: a dependent asks with `.package(url: …, traits: ["Metrics"])`), and its sources
//   compile to an empty module without it;
// - the benchmarks, the examples, the test hosts and the fuzz targets are executable targets
//   that are not declared products: this package builds and runs them (`swift run Benchmarks`,
//   `swift run kv-daemon`), a dependent never sees them.
// This package's own tests and benchmarks use every adapter: `swift test --enable-all-traits`.

/// Set (to anything) for builds that need only the toolchain-only targets and their tests — the
/// sanitizer and fuzzing runs of .ci/run: the benchmarks, the adapters' tests and their packages
/// (SwiftNIO, gRPC, swift-service-lifecycle, swift-metrics, swift-log) are then left out.
let coreOnly = Context.environment["RUNLOOPKIT_CORE_ONLY"] != nil

/// A dependency of an adapter target: the product is compiled only when `trait` is enabled.
func adapterDependency(_ product: String, _ package: String, trait: String) -> Target.Dependency {
    .product(name: product, package: package, condition: .when(traits: [trait]))
}

let package = Package(
    name: "RunLoopKit",
    products: [
        // The toolchain only (libsystemd too for RunLoopKitSystemd).
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .library(name: "RunLoopKitSystemd", targets: ["RunLoopKitSystemd"]),
        .library(name: "RunLoopKitDistributed", targets: ["RunLoopKitDistributed"]),
        // See inside a running daemon: list, status, monitor, call, trace (DESIGN §2h).
        .executable(name: "runloopctl", targets: ["runloopctl"]),
        // Adapters: each needs its trait.
        .library(name: "RunLoopKitServiceLifecycle", targets: ["RunLoopKitServiceLifecycle"]),
        .library(name: "RunLoopKitMetrics", targets: ["RunLoopKitMetrics"]),
        .library(name: "RunLoopKitLogging", targets: ["RunLoopKitLogging"]),
        .library(name: "RunLoopKitGRPC", targets: ["RunLoopKitGRPC"]),
        .library(name: "RunLoopKitTracing", targets: ["RunLoopKitTracing"]),
    ],
    traits: [
        .trait(name: "ServiceLifecycle",
               description: "RunLoopKitServiceLifecycle: resident threads as swift-service-lifecycle services"),
        .trait(name: "Metrics", description: "RunLoopKitMetrics: loop and port statistics as swift-metrics"),
        .trait(name: "Logging", description: "RunLoopKitLogging: loop-health and transport reports as swift-log records"),
        .trait(name: "GRPC", description: "RunLoopKitGRPC: ports across hosts over gRPC (grpc-swift 2, SwiftNIO)"),
        .trait(name: "Tracing",
               description: "RunLoopKitTracing: a sender's ServiceContext carried with its messages (swift-distributed-tracing)"),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // Documentation only: `swift package generate-documentation` (CI builds the DocC catalogs).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The few things Swift cannot express: CMSG_* macros, futex and epoll_pwait2 entry points.
        .target(name: "CRunLoopKit"),
        .target(name: "RunLoopKit", dependencies: ["CRunLoopKit"]),

        // libsystemd, found through pkg-config; Debian/Ubuntu provider: libsystemd-dev.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "RunLoopKitSystemd", dependencies: ["RunLoopKit", "CSystemd"]),

        // The operator's tool: reads /proc and the processes' introspection endpoints.
        .executableTarget(name: "runloopctl", dependencies: ["RunLoopKit"], path: "Sources/runloopctl"),

        // Swift distributed actors over named ports: the toolchain's Distributed module only.
        .target(name: "RunLoopKitDistributed", dependencies: ["RunLoopKit", "CRunLoopKit"]),

        // Adapters to the Swift server ecosystem, each its own product behind its own trait.
        .target(
            name: "RunLoopKitServiceLifecycle",
            dependencies: ["RunLoopKit",
                           adapterDependency("ServiceLifecycle", "swift-service-lifecycle", trait: "ServiceLifecycle")]
        ),
        .target(
            name: "RunLoopKitMetrics",
            dependencies: ["RunLoopKit", adapterDependency("CoreMetrics", "swift-metrics", trait: "Metrics")]
        ),
        .target(
            name: "RunLoopKitLogging",
            dependencies: ["RunLoopKit", adapterDependency("Logging", "swift-log", trait: "Logging")]
        ),
        .target(
            name: "RunLoopKitGRPC",
            dependencies: [
                "RunLoopKit",
                adapterDependency("GRPCCore", "grpc-swift-2", trait: "GRPC"),
                adapterDependency("GRPCNIOTransportHTTP2", "grpc-swift-nio-transport", trait: "GRPC"),
                adapterDependency("NIOCore", "swift-nio", trait: "GRPC"),
                adapterDependency("ServiceLifecycle", "swift-service-lifecycle", trait: "GRPC"),
                adapterDependency("X509", "swift-certificates", trait: "GRPC"),
            ]
        ),
        .target(
            name: "RunLoopKitTracing",
            dependencies: ["RunLoopKit", adapterDependency("Tracing", "swift-distributed-tracing", trait: "Tracing")]
        ),

        // The examples (not products: `swift run example-daemon`, `swift run kv-daemon`). The
        // example daemon and client offer `--grpc` when built with the GRPC trait.
        .target(name: "ExampleWire", dependencies: ["RunLoopKit", "RunLoopKitDistributed"], path: "Examples/ExampleWire"),
        .executableTarget(
            name: "example-daemon",
            dependencies: ["RunLoopKit", "RunLoopKitSystemd", "RunLoopKitDistributed", "ExampleWire",
                           .target(name: "RunLoopKitGRPC", condition: .when(traits: ["GRPC"]))],
            path: "Examples/ExampleDaemon",
            exclude: ["example-daemon.service", "example-daemon.socket"]
        ),
        .executableTarget(
            name: "example-client",
            dependencies: ["RunLoopKit", "RunLoopKitDistributed", "ExampleWire",
                           .target(name: "RunLoopKitGRPC", condition: .when(traits: ["GRPC"]))],
            path: "Examples/ExampleClient"
        ),
        .executableTarget(
            name: "kv-daemon",
            dependencies: ["RunLoopKit", "RunLoopKitSystemd"],
            path: "Examples/KeyValueDaemon"
        ),

        .testTarget(
            name: "RunLoopKitTests",
            dependencies: ["RunLoopKit", "PackageTestSupport", "LoopHost", "IntrospectionHost", "runloopctl",
                           "ResidentThreadsExample",
                           "PortsAndMessagesExample", "CrossProcessExample", "ConcurrencyExample", "ComingFromCFExample",
                           "ComingFromCFThreadsExample"]
        ),
        // What several test targets share: reading the package's files, waiting on a thread of
        // its own, spawning, and a notify socket that stands in for systemd's.
        .target(name: "PackageTestSupport", dependencies: ["RunLoopKit"], path: "Tests/PackageTestSupport"),
        // The DocC articles' examples, each a complete program that its article shows verbatim;
        // DocumentationExampleTests checks that the two match and runs the program.
        .executableTarget(name: "ComingFromCFExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/ComingFromCF"),
        .executableTarget(name: "ComingFromCFThreadsExample", dependencies: ["RunLoopKit"],
                          path: "Tests/DocExamples/ComingFromCFThreads"),
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
        .executableTarget(name: "DistributedExample", dependencies: ["RunLoopKit", "RunLoopKitDistributed"],
                          path: "Tests/DocExamples/Distributed"),
        // A program whose main thread runs ThreadRunLoop.main, for the main-dispatch-queue tests
        // (the test runner owns the test process's main thread).
        .executableTarget(name: "LoopHost", dependencies: ["RunLoopKit"], path: "Tests/LoopHost"),
        // The daemon runloopctl inspects in the introspection tests.
        .executableTarget(name: "IntrospectionHost", dependencies: ["RunLoopKit"], path: "Tests/IntrospectionHost"),
        // Cross-process transport test peers: a Swift program using RunLoopKit, and an
        // independent C implementation of Protocols/port-message-frame.md.
        .executableTarget(name: "PortPeer", dependencies: ["RunLoopKit"], path: "Tests/PortPeer"),
        .executableTarget(name: "PortPeerC", path: "Tests/PortPeerC"),
        .testTarget(name: "RunLoopKitTransportTests", dependencies: ["RunLoopKit", "PortPeer", "PortPeerC"]),
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
        .executableTarget(name: "FuzzEnvelope", dependencies: ["RunLoopKit", "RunLoopKitDistributed", "FuzzSupport"],
                          path: "Fuzz/FuzzEnvelope"),

        // A daemon whose worker loop the watchdog tests wedge and unwedge with signals.
        .executableTarget(name: "WatchdogHost", dependencies: ["RunLoopKit", "RunLoopKitSystemd"],
                          path: "Tests/WatchdogHost"),
        .testTarget(
            name: "RunLoopKitSystemdTests",
            dependencies: ["RunLoopKit", "RunLoopKitSystemd", "PackageTestSupport", "example-daemon",
                           "example-client", "SystemdDaemonExample", "WatchdogHost"]
        ),
        // The other process of the distributed-actor tests: publishes actors or calls them.
        .executableTarget(name: "DistributedPeer", dependencies: ["RunLoopKit", "RunLoopKitDistributed"],
                          path: "Tests/DistributedPeer"),
        .testTarget(
            name: "RunLoopKitDistributedTests",
            dependencies: ["RunLoopKit", "RunLoopKitDistributed", "PackageTestSupport", "DistributedPeer",
                           "DistributedExample"]
        ),
        // kv-daemon under real Redis clients (redis-cli, redis-server for the differential test).
        .testTarget(name: "KeyValueDaemonTests", dependencies: ["RunLoopKit", "PackageTestSupport", "kv-daemon"]),
    ],
    swiftLanguageModes: [.v6]
)

// The adapters' tests (they need their traits: `swift test --enable-all-traits`) and the
// benchmarks, with SwiftNIO and gRPC, peers they measure against.
if !coreOnly {
    package.targets += [
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
            dependencies: ["RunLoopKit", "RunLoopKitServiceLifecycle", "ServiceHost", "PackageTestSupport",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle")]
        ),
        .testTarget(
            name: "RunLoopKitMetricsTests",
            dependencies: ["RunLoopKit", "RunLoopKitMetrics",
                           .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
        .testTarget(
            name: "RunLoopKitLoggingTests",
            dependencies: ["RunLoopKit", "RunLoopKitLogging", .product(name: "Logging", package: "swift-log"),
                           .product(name: "InMemoryLogging", package: "swift-log")]
        ),
        // The other process of the tracing tests: handles a message within the context it carries.
        .executableTarget(
            name: "TracingPortPeer",
            dependencies: ["RunLoopKit", "RunLoopKitTracing",
                           .product(name: "Tracing", package: "swift-distributed-tracing")],
            path: "Tests/TracingPortPeer"
        ),
        .testTarget(
            name: "RunLoopKitTracingTests",
            dependencies: ["RunLoopKit", "RunLoopKitTracing", "RunLoopKitDistributed", "TracingPortPeer",
                           "PackageTestSupport", .product(name: "Tracing", package: "swift-distributed-tracing"),
                           .product(name: "InMemoryTracing", package: "swift-distributed-tracing")]
        ),
        // The other process of the gRPC bridge tests: serves or calls a port over gRPC.
        .executableTarget(name: "GRPCPortPeer", dependencies: ["RunLoopKit", "RunLoopKitGRPC"],
                          path: "Tests/GRPCPortPeer"),
        .testTarget(
            name: "RunLoopKitGRPCTests",
            dependencies: [
                "RunLoopKit", "RunLoopKitGRPC", "GRPCPortPeer", "PackageTestSupport",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),

        // Benchmarks: C peers (eventfd, ring + eventfd, socketpair, sd-event, sd-bus, memfd) and the
        // Swift harness, which also times the gRPC bridge (xhost) when built with the GRPC trait
        // and trace context when built with the Tracing trait.
        .target(name: "CBenchmarkPeers", dependencies: ["CSystemd"], path: "Benchmarks/CBenchmarkPeers"),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                "RunLoopKit", "RunLoopKitDistributed", "CBenchmarkPeers",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .target(name: "RunLoopKitGRPC", condition: .when(traits: ["GRPC"])),
                .target(name: "RunLoopKitTracing", condition: .when(traits: ["Tracing"])),
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "GRPCCore", package: "grpc-swift-2", condition: .when(traits: ["GRPC"])),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport",
                         condition: .when(traits: ["GRPC"])),
            ],
            path: "Benchmarks/Benchmarks"
        ),
    ]
}
