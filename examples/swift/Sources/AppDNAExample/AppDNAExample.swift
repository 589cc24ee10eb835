// The seed page "iOS Offline Support" as a Swift host sees it, against the
// local dev server:
//
//   1. configure AppDNA (the seed's call) and observe AppDNA.configUpdated
//      on the main queue (the seed's observer);
//   2. a config is published at the server: the observer runs, and the
//      typed getters serve the new values;
//   3. events are tracked and flushed; with consent revoked they are dropped.
//
//   AppDNAExample [API_URL]    API_URL defaults to $APPNORTH_TEST_SERVER,
//                              then http://127.0.0.1:8080
//
// Publishing a config uses the dev server's /admin endpoint, which a real
// API does not have; everything else is the AppNorth library's public API.
import AppNorth
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@main
struct AppDNAExample {
    static let apiKey = "demo"

    static func main() async {
        let environment = ProcessInfo.processInfo.environment
        let apiURL = CommandLine.arguments.dropFirst().first ?? environment["APPNORTH_TEST_SERVER"] ?? "http://127.0.0.1:8080"
        let dataRoot = FileManager.default.temporaryDirectory.appendingPathComponent("appdna-example-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataRoot) }
        do {
            try await run(apiURL: apiURL, dataRoot: dataRoot)
            print("AppDNA example: done")
        } catch {
            print("AppDNA example failed: \(error)")
            exit(1)
        }
    }

    static func run(apiURL: String, dataRoot: String) async throws {
        // Every environment, .production included, goes to the dev server,
        // and the data lives in a throwaway folder instead of Application Support.
        AppDNA.useDevServer(apiURL: apiURL, dataRoot: dataRoot)

        print("1. configure, and observe config updates on the main queue")
        let updates = AsyncStream<[String]>.makeStream()
        let observer = NotificationCenter.default.addObserver(
            forName: AppDNA.configUpdated,
            object: nil,
            queue: .main
        ) { notification in
            let keys = notification.userInfo?[AppDNA.changedKeysKey] as? [String] ?? []
            print("   configUpdated on the main queue: \(OperationQueue.current == OperationQueue.main), changed \(keys)")
            updates.continuation.yield(keys)
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        AppDNA.configure(
            apiKey: apiKey,
            environment: .production,
            options: AppDNAOptions(configTTL: 1800) // 30 minutes
        )
        try await AppDNA.ready()
        print("   configured; config tier \(AppDNA.config.tier)")

        print("2. publish a config at the server")
        try await publish(apiURL: apiURL, #"{"welcome":"Hello from the dev server","price":9.99,"slots":3}"#)
        guard try await firstUpdate(of: updates.stream, containing: "welcome", within: 30) else {
            throw ExampleError("no configUpdated within 30 s")
        }
        let config = AppDNA.config
        print("   welcome = \(config.string("welcome", default: "Hi")), price = \(config.double("price", default: 0)), "
              + "slots = \(config.int("slots", default: 1)), tier \(config.tier)")

        print("3. track events, with and without consent")
        AppDNA.setConsent(analytics: true)
        AppDNA.track("example_opened", properties: ["source": "examples/swift", "price": 9.99])
        let sent = try await AppDNA.flush()
        print("   consent granted: the server accepted \(sent) event(s)")
        AppDNA.setConsent(analytics: false)
        AppDNA.track("example_dropped")
        let dropped = try await AppDNA.flush()
        print("   consent revoked: the server accepted \(dropped) event(s); the event was never stored")

        await AppDNA.shutdown()
    }

    /// Waits for a notification that names `key`, at most `seconds`.
    static func firstUpdate(of stream: AsyncStream<[String]>, containing key: String, within seconds: Double) async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await keys in stream where keys.contains(key) { return true }
                return false
            }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// The dev server's admin endpoint that publishes a config version.
    static func publish(apiURL: String, _ configJSON: String) async throws {
        guard let url = URL(string: "\(apiURL)/admin/apps/\(apiKey)/config") else { throw ExampleError("bad URL \(apiURL)") }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(#"{"config":\#(configJSON)}"#.utf8)
        let (_, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 201 else { throw ExampleError("publish failed: \(response)") }
    }
}

struct ExampleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
