import Glibc
import XCTest
@testable import AppNorthCore

/// ForkGuard.inChild: a hook runs in each forked child, on its only thread,
/// after the fork handlers made the locks usable, and never in the parent.
final class ForkGuardHookTests: XCTestCase {
    func testAChildHookRunsOnceInTheChildAndNotInTheParent() {
        let counter = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        counter.initialize(to: 0)
        defer { counter.deallocate() }
        let address = Int(bitPattern: counter)
        ForkGuard.inChild { UnsafeMutablePointer<Int32>(bitPattern: address)!.pointee += 1 }
        let lock = Lock(0, level: LockClass.test)
        let parentGeneration = ForkGuard.generation
        let pid = fork()
        if pid == 0 {
            // The hook ran once, the generation moved on, and a lock works.
            let ok = counter.pointee == 1 && ForkGuard.generation == parentGeneration + 1
                && lock.withLock { $0 + 1 } == 1
            _exit(ok ? 0 : 1)
        }
        XCTAssertGreaterThan(pid, 0)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        XCTAssertEqual(status & 0x7f, 0, "the child was not killed by a signal")
        XCTAssertEqual((status >> 8) & 0xff, 0, "the child saw the hook run once, a new generation and a usable lock")
        XCTAssertEqual(counter.pointee, 0, "the parent never runs the hook")
    }
}
