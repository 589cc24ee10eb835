#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The dev server a test process uses (both test targets' TestServer).
///
/// Under `swift test --parallel` each test runs in a process of its own, and
/// the tests reset their server: with several servers (APPNORTH_TEST_SERVERS,
/// from with-devserver.sh's DEVSERVER_COUNT) a process holds an flock on its
/// server's lock file for its whole life, so no two processes share one.
/// There are as many servers as workers, so a free one is there; the
/// blocking wait on the first covers a run with more workers than servers.
/// With one server, APPNORTH_TEST_SERVER is the answer; nil outside
/// `make test-swift`.
public let claimedTestServer: String? = {
    func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
    guard let list = env("APPNORTH_TEST_SERVERS"), let locks = env("APPNORTH_TEST_SERVER_LOCKS") else {
        return env("APPNORTH_TEST_SERVER")
    }
    let urls = list.split(separator: " ").map(String.init)
    for (index, url) in urls.enumerated() {
        let fd = open("\(locks)/\(index).lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 { return url }  // held until the process exits
        if fd >= 0 { close(fd) }
    }
    let fd = open("\(locks)/0.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
    if fd >= 0 { _ = flock(fd, LOCK_EX) }
    return urls.first
}()
