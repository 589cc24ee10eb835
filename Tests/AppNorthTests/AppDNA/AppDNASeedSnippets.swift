import AppNorth
import Foundation
import Synchronization

// The Swift snippets of the seed page "iOS Offline Support"
// (appdna-ios-offline-support.md), copied verbatim into the bodies below:
// this file compiling with no warnings under Swift 6 is the proof that they
// build as written. AppDNATests runs them against the local dev server.
enum AppDNASeedSnippets {
    /// "Config TTL".
    static func configure() {
        AppDNA.configure(
            apiKey: "adn_live_xxx",
            environment: .production,
            options: AppDNAOptions(configTTL: 1800) // 30 minutes
        )
    }

    /// "Config Update Notifications". The snippet keeps no token, so the
    /// observer stays registered for the rest of the test process.
    static func observeConfigUpdates() {
        NotificationCenter.default.addObserver(
            forName: AppDNA.configUpdated,
            object: nil,
            queue: .main
        ) { notification in
            print("Config updated — refreshing UI")
            // Re-read remote config values and update UI
        }
    }

    /// "Consent and Offline Behavior".
    static func revokeConsent() {
        AppDNA.setConsent(analytics: false)
    }

    /// The seed's API key, which the snippets use as the App ID.
    static let apiKey = "adn_live_xxx"
}

/// What the snippets printed, and on which thread: this file's `print`
/// shadows the standard library's, so the verbatim observer's output can be
/// checked.
enum SnippetOutput {
    struct Line: Sendable {
        let text: String
        let onMainThread: Bool
    }

    static let lines = Mutex<[Line]>([])

    static func count(of text: String) -> Int { lines.withLock { $0.filter { $0.text == text }.count } }
    static func all(_ text: String) -> [Line] { lines.withLock { $0.filter { $0.text == text } } }
}

private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    let text = items.map { "\($0)" }.joined(separator: separator)
    SnippetOutput.lines.withLock { $0.append(SnippetOutput.Line(text: text, onMainThread: Thread.isMainThread)) }
    Swift.print(text, terminator: terminator)
}
