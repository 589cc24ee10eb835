import AppNorth
import XCTest

/// `import AppNorth` alone gives a Swift host the core's types.
final class ModuleTests: XCTestCase {
    func testCoreIsReexported() {
        XCTAssertEqual(AppNorthVersion.string, "\(AppNorthVersion.major).\(AppNorthVersion.minor).\(AppNorthVersion.patch)")
        XCTAssertGreaterThan(AppNorthVersion.number, 0)
    }
}
