// swift-tools-version:6.0
// A Swift host of libappnorth: depends on the AppNorth library product by
// path, as an app would depend on it by URL and version.
import PackageDescription

let package = Package(
    name: "appnorth-swift-example",
    // AppNorth's own floor on Apple platforms; Linux needs none.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        .package(name: "appnorth", path: "../.."),
    ],
    targets: [
        // "AppNorth" by name: the product of the package at ../.., whatever
        // its checkout folder is called.
        .executableTarget(name: "AppDNAExample", dependencies: [.product(name: "AppNorth", package: "appnorth")],
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
