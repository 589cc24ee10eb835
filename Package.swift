// swift-tools-version:6.2
// libappnorth: an offline-first client SDK core in Swift, shipped as a
// C-ABI shared library (libappnorth.so), and as Swift libraries: AppNorthCore
// (the Foundation-free core) and AppNorth (the Swift hosts' API over it).
import PackageDescription

let swift6: [SwiftSetting] = [.swiftLanguageMode(.v6)]
// The Swift hosts' API and its seed-snippet tests compile with no warnings.
let swift6Strict: [SwiftSetting] = swift6 + [.treatAllWarnings(as: .error)]

let package = Package(
    name: "appnorth",
    // Linux needs none; on Apple platforms Synchronization (the core) and
    // Observation (AppNorth) set the floor.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        // The C-ABI shared library: libappnorth.so.
        .library(name: "appnorth", type: .dynamic, targets: ["AppNorthC"]),
        // The Foundation-free Swift core that libappnorth.so is built from.
        // Its API is what AppNorth re-exports (`public`); the rest is
        // `package`, for AppNorthC and AppNorth only (docs/public-api.md).
        .library(name: "AppNorthCore", targets: ["AppNorthCore"]),
        // The Swift API for Swift hosts (Foundation-based), over the core.
        .library(name: "AppNorth", targets: ["AppNorth"]),
    ],
    targets: [
        // System libraries the core is built on.
        .systemLibrary(name: "CJansson", pkgConfig: "jansson",
                       providers: [.apt(["libjansson-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        // zlib: gzip request bodies (Content-Encoding: gzip).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        // The hand-written public header, imported so that the C-ABI layer's
        // @c @implementation functions are checked against it.
        .systemLibrary(name: "CAppNorthAPI"),
        .systemLibrary(name: "CSystem"),
        // The C layer's per-thread call record: a C thread-local (Swift has
        // none), one definition in thread_calls.c (Sources/AppNorthC/ThreadCalls.swift).
        .target(name: "CThreadCalls"),

        .target(name: "AppNorthCore", dependencies: ["CJansson", "CSQLite", "CCurl", "CZlib", "CSystem"],
                swiftSettings: swift6),
        .target(name: "AppNorthC", dependencies: ["AppNorthCore", "CAppNorthAPI", "CSystem", "CThreadCalls"],
                swiftSettings: swift6),
        .target(name: "AppNorth", dependencies: ["AppNorthCore"],
                swiftSettings: swift6Strict),
        // AppNorthCore is named although AppNorth re-exports it: without it
        // an incremental build does not recompile these tests when a core
        // type they use changes layout (a stale build that crashes).
        // The dev server a test process takes when `swift test --parallel`
        // runs each test in a process of its own (make test-swift).
        .target(name: "TestServerClaim", path: "Tests/TestServerClaim", swiftSettings: swift6),
        .testTarget(name: "AppNorthTests", dependencies: ["AppNorth", "AppNorthCore", "TestServerClaim"],
                    swiftSettings: swift6Strict),
        .testTarget(name: "AppNorthCoreTests", dependencies: ["AppNorthCore", "TestServerClaim"],
                    swiftSettings: swift6),
    ]
)
