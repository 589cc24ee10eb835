// Raw HTTP responses through the real transport: a loopback server answers
// each request with the fuzz input as its bytes, then closes. The client
// reads them as a list of boards, a config fetch, or a config stream.
import Glibc
@testable import AppNorthCore

/// The loopback server: accepts one connection at a time, reads the
/// request head, writes the current answer and closes.
final class LoopbackServer: @unchecked Sendable {
    // @unchecked: `answer` is set before each request, under `lock`.
    private var answer: [UInt8] = []
    private var lock = pthread_mutex_t()
    let port: UInt16
    private let listener: Int32

    init() {
        pthread_mutex_init(&lock, nil)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        listen(listener, 16)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        var thread = pthread_t()
        let me = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { raw in
            Unmanaged<LoopbackServer>.fromOpaque(raw!).takeUnretainedValue().serve()
            return nil
        }, me)
    }

    func set(_ bytes: [UInt8]) {
        pthread_mutex_lock(&lock)
        answer = bytes
        pthread_mutex_unlock(&lock)
    }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 { continue }
            readHead(connection)
            pthread_mutex_lock(&lock)
            let bytes = answer
            pthread_mutex_unlock(&lock)
            bytes.withUnsafeBytes { buffer in
                var sent = 0
                while sent < buffer.count {
                    let n = send(connection, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                    if n <= 0 { break }
                    sent += n
                }
            }
            shutdown(connection, Int32(SHUT_WR))
            close(connection)
        }
    }

    /// Reads until the blank line that ends a request head (our requests
    /// are GETs without a body).
    private func readHead(_ connection: Int32) {
        var tail: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
            tail += buffer[0..<n]
            if tail.count > 4 { tail.removeFirst(tail.count - 4) }
            if tail == Array("\r\n\r\n".utf8) { return }
        }
    }
}

let server: LoopbackServer = {
    signal(SIGPIPE, SIG_IGN)
    return LoopbackServer()
}()

let client: AppNorthClient = {
    let configuration = try! AppNorthClientConfiguration(
        apiURL: "http://127.0.0.1:\(server.port)", appID: "fuzz",
        timeouts: HTTPTimeouts(apiRequestMilliseconds: 2000, resourceDownloadMilliseconds: 2000,
                               connectMilliseconds: 1000))
    return AppNorthClient(configuration: configuration)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let mode = input.byte() % 3
    server.set(input.rest())
    let endpoint = ConfigEndpoint(client: client, logger: .silent)
    switch mode {
    case 0:
        if let text = try? client.listBoards() {
            require(!text.utf8.contains(0), "a response with a raw NUL was accepted")
        }
    case 1:
        _ = try? endpoint.fetch(etag: "\"1\"", cancel: nil)
    default:
        // The config stream: chunks through the SSE parser, as the live
        // config reads them.
        var parser = ServerSentEventParser(maxEventBytes: 1 << 16)
        _ = try? endpoint.transport.stream(endpoint.streamRequest(lastEventID: "1"), idleTimeoutMs: 2000,
                                           cancel: CancellationToken()) { chunk in
            for event in parser.feed(chunk) { _ = try? ConfigEndpoint.parsePayload(event.data, what: "fuzz") }
            return true
        }
    }
    return 0
}
