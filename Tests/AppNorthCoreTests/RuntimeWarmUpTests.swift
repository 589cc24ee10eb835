import XCTest
@testable import AppNorthCore

/// RuntimeWarmUp: a process's first client makes the start path's first
/// uses once; no later client or call runs them again.
final class RuntimeWarmUpTests: XCTestCase {
    func testFirstUsesRunOncePerProcessAndAClientHasMadeThem() throws {
        _ = AppNorthClient(configuration: try AppNorthClientConfiguration(apiURL: "http://127.0.0.1:9", appID: "warm"))
        var ranAgain = false
        RuntimeWarmUp.once { ranAgain = true }
        XCTAssertFalse(ranAgain, "a client made the first uses already: once does not run them again")
    }
}
