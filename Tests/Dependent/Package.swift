// swift-tools-version: 6.1
// A package that depends on the RunLoopKit product alone, as a user's daemon would.
// `.ci/check-dependents` builds it and checks, from the build log, that nothing of the
// adapters' dependencies (SwiftNIO, swift-service-lifecycle, swift-metrics, gRPC) is compiled.
import PackageDescription

// A path dependency's identity is its folder's name, which is whatever the checkout is called.
let repository = "../.."
let repositoryName = String(Context.packageDirectory.split(separator: "/").dropLast(2).last ?? "RunLoopKit")

let package = Package(
    name: "Dependent",
    dependencies: [
        .package(path: repository),
    ],
    targets: [
        .executableTarget(
            name: "Dependent",
            dependencies: [.product(name: "RunLoopKit", package: repositoryName)]
        ),
    ],
    swiftLanguageModes: [.v6]
)
