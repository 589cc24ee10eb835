import XCTest
import Glibc
@testable import AppNorthCore

/// The event journal: its record format, damage, and the recovery of
/// journals that ended processes left.
final class JournalTests: EventsTestCase {
    override class var isolatedApp: Bool { true }

    func payload(_ name: String, id: String = Random.uuidV7(unixMilliseconds: 1_700_000_000_000)) -> [UInt8] {
        EventPayload.build(id: id, name: name, timestampMs: 1_700_000_000_000, propertiesJSON: #"{"n":1}"#,
                           anonymousID: "anon", userID: nil, sessionID: "s")
    }

    func names(_ decoded: JournalRecord.Decoded) -> [String] {
        decoded.events.map { (try? JSON.parse(String(decoding: $0.payload, as: UTF8.self)))?["name"]?.stringValue ?? "?" }
    }

    func testRecordsRoundTrip() {
        let bytes = JournalRecord.encode(payload("a")) + JournalRecord.encode(payload("b"))
        let decoded = JournalRecord.decode(bytes)
        XCTAssertEqual(names(decoded), ["a", "b"])
        XCTAssertEqual(decoded.damaged, 0)
        XCTAssertEqual(decoded.events.first?.id.count, 36)
    }

    func testATornLastRecordIsDropped() {
        let whole = JournalRecord.encode(payload("a"))
        let torn = JournalRecord.encode(payload("b"))
        for cut in [1, 8, 15, 16, 17, torn.count - 1] {
            let decoded = JournalRecord.decode(whole + torn.prefix(cut))
            XCTAssertEqual(names(decoded), ["a"], "cut at \(cut)")
            XCTAssertEqual(decoded.damaged, 1, "cut at \(cut)")
        }
    }

    func testDamageIsSkippedAndTheNextRecordFound() {
        let a = JournalRecord.encode(payload("a")), b = JournalRecord.encode(payload("b")), c = JournalRecord.encode(payload("c"))
        var flipped = b
        flipped[40] ^= 0x01  // a payload byte: the checksum fails
        XCTAssertEqual(names(JournalRecord.decode(a + flipped + c)), ["a", "c"])
        var huge = b
        huge[4] = 0xFF; huge[5] = 0xFF; huge[6] = 0xFF; huge[7] = 0xFF  // length 4 GiB
        XCTAssertEqual(names(JournalRecord.decode(a + huge + c)), ["a", "c"])
        var short = b
        short[4] = 3; short[5] = 0; short[6] = 0; short[7] = 0  // length too small
        XCTAssertEqual(names(JournalRecord.decode(a + short + c)), ["a", "c"])
        let garbage: [UInt8] = Array("ANJ1ANJ1\u{0}\u{0}\u{0}garbage".utf8)
        let decoded = JournalRecord.decode(garbage + a + garbage + c + garbage)
        XCTAssertEqual(names(decoded), ["a", "c"])
        XCTAssertEqual(decoded.damaged, 3)
        // A payload whose checksum holds but which carries no event id.
        XCTAssertEqual(names(JournalRecord.decode(JournalRecord.encode(Array("{}".utf8)) + c)), ["c"])
        XCTAssertEqual(JournalRecord.decode([]).events.count, 0)
    }

    func testAnEndedProcessJournalIsImportedAtOpen() throws {
        let bytes = JournalRecord.encode(payload("left1")) + JournalRecord.encode(payload("left2"))
        try assertLeftJournalIsImported(bytes + JournalRecord.encode(payload("torn")).prefix(30),
                                        name: "events-999999-0123456789abcdef.journal")
    }

    /// An ended process's journal larger than the limits allow is set
    /// aside (renamed, logged), not read: the open does not walk it.
    func testAnOversizeOrphanIsSetAsideAndTheOthersImported() throws {
        _ = try DataDirectory(path: folder)
        // Sparse: no disk space, but its size says more than the limits allow.
        let oversize = folder + "/events-999996-0000000000000000.journal"
        writeFile(oversize, JournalRecord.encode(payload("inside")))
        let largest = EventJournal.largestFile(maxEvents: 10_000, maxBytes: 5 << 20)
        XCTAssertEqual(truncate(oversize, off_t(largest) + 1), 0)
        let good = folder + "/events-999995-1111111111111111.journal"
        writeFile(good, JournalRecord.encode(payload("good")))
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .warning) { _, line in lines.withLock { $0.append(line) } }
        let events = try open(quiet(), logger: logger)
        XCTAssertEqual(events.queuedCount, 1, "the readable orphan is imported; the open does not fail")
        XCTAssertFalse(journalFiles().contains(oversize), "no longer a journal")
        XCTAssertEqual(access(oversize + EventJournal.asideSuffix, F_OK), 0, "set aside, not deleted")
        XCTAssertFalse(journalFiles().contains(good))
        XCTAssertTrue(lines.withLock { $0 }.contains { $0.contains("set aside") })
        events.close(timeoutMilliseconds: 0)
    }

    /// A journal is read a window at a time: records across windows (one
    /// longer than a window), damage in between, every offset the same as
    /// a whole read gives.
    func testAReaderGivesWhatAWholeReadGives() throws {
        _ = try DataDirectory(path: folder)
        var bytes: [UInt8] = []
        for i in 0..<300 {
            let pad = String(repeating: "x", count: i == 150 ? 3000 : (i * 37) % 200)
            bytes += JournalRecord.encode(payload("e\(i)" + pad))
            if i % 50 == 7 { bytes += [0x41, 0x4E, 0x4A, 0x31, 9, 9, 9] }  // a torn stretch
        }
        let path = folder + "/events-1-0000000000000000.journal"
        writeFile(path, bytes)
        let fd = Glibc.open(path, O_RDONLY)
        defer { close(fd) }
        for window in [16, 100, 1000, 4096, 1 << 20] {
            let reader = try JournalReader(fd: fd, path: path, windowBytes: window)
            var position = 0, count = 0
            while let found = try reader.next(from: position) {
                let whole = JournalRecord.next(in: bytes, from: position)
                XCTAssertEqual(found.event, whole?.event, "window \(window)")
                XCTAssertEqual([found.start, found.end, found.damaged], [whole?.start, whole?.end, whole?.damaged].map { $0 ?? -1 })
                XCTAssertLessThanOrEqual(reader.windowCount, max(window, 3000 + 200))
                guard found.event != nil else { break }
                count += 1
                position = found.end
            }
            XCTAssertEqual(count, 300, "window \(window)")
        }
    }

    /// A handle tells its journals from another handle's of the same
    /// process, and from another process's, by name alone (the limits'
    /// look at the directory, #32); the name's format is unchanged.
    func testAHandleKnowsItsOwnJournalsByName() throws {
        let directory = try DataDirectory(path: folder)
        let one = try EventJournal(directory: directory, epoch: 3), two = try EventJournal(directory: directory, epoch: 3)
        let names = journalFiles().map { String($0.dropFirst(folder.count + 1)) }
        XCTAssertEqual(names.count, 2)
        XCTAssertEqual(names.filter(one.isOwn).count, 1)
        XCTAssertEqual(names.filter(two.isOwn).count, 1)
        XCTAssertNotEqual(names.filter(one.isOwn), names.filter(two.isOwn))
        for name in names { XCTAssertEqual(EventJournal.epoch(ofName: name), 3, name) }
        let token = one.handleToken + "0123abcd"
        XCTAssertTrue(one.isOwn("events-\(getpid())-r0-\(token).journal"))
        XCTAssertFalse(one.isOwn("events-\(getpid() + 1)-r0-\(token).journal"), "another process")
        XCTAssertFalse(one.isOwn("events-\(getpid())-r0-0123abcd\(one.handleToken).journal"))
        XCTAssertFalse(one.isOwn("events-\(getpid())-r0-ab.journal"))
    }

    func testAJournalMarkedImportedIsOnlyRemoved() throws {
        // The process died after its import committed, before it removed
        // the file: importing it again would queue its events twice.
        let directory = try DataDirectory(path: folder)
        let name = "events-999998-fedcba9876543210.journal"
        writeFile(folder + "/" + name, JournalRecord.encode(payload("once")))
        let db = try SQLiteStore(directory: directory)
        try db.kvPut(namespace: EventImporter.importedNamespace, key: name, value: [], updatedMs: 0)
        let events = try open(quiet())
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertFalse(journalFiles().contains(folder + "/" + name))
        XCTAssertNil(try db.kvGet(namespace: EventImporter.importedNamespace, key: name), "the mark goes with the file")
        events.close(timeoutMilliseconds: 0)
    }

    func testALiveProcessJournalIsLeftAlone() throws {
        _ = try DataDirectory(path: folder)
        let live = folder + "/events-999997-aaaaaaaaaaaaaaaa.journal"
        writeFile(live, JournalRecord.encode(payload("live")))
        let fd = Glibc.open(live, O_RDWR)
        XCTAssertEqual(flock(fd, LOCK_EX), 0)
        let events = try open(quiet())
        XCTAssertEqual(events.queuedCount, 1, "counted (the limits are the directory's), but not imported")
        XCTAssertEqual(events.store.table.count.load(ordering: .relaxed), 0, "a locked journal belongs to a live process")
        XCTAssertTrue(journalFiles().contains(live))
        // Closed first: its upload thread also imports dead journals, and
        // an import it had in progress while the next open looked would be
        // skipped there as locked (not lost: it lands in the table a moment
        // later), which this count cannot wait for.
        events.close(timeoutMilliseconds: 0)
        close(fd)  // the owner ends: the next open imports it
        let again = try open(quiet())
        XCTAssertEqual(again.queuedCount, 1)
        again.close(timeoutMilliseconds: 0)
    }

    func testRevokingConsentPurgesJournaledEvents() throws {
        let events = try open(quiet())
        for i in 0..<5 { try events.track("j\(i)") }
        XCTAssertEqual(events.queuedCount, 5)
        try events.setConsent(analytics: false)
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["consent"]?.intValue, 5)
        XCTAssertEqual(journalFiles().flatMap { JournalRecord.decode((try? readFile($0)) ?? []).events }.count, 0)
        events.close(timeoutMilliseconds: 0)
        let again = try open(quiet())
        XCTAssertEqual(again.queuedCount, 0, "nothing comes back at the next open")
        again.close(timeoutMilliseconds: 0)
    }

    func testConcurrentTracksLandOnceEach() throws {
        let events = try open(quiet { $0.batchThreshold = 50; $0.networkType = .wifi })
        let perThread = 300
        for t in 0..<4 {
            try spawn("tracker\(t)") { _ in
                for i in 0..<perThread { try? events.track("t\(t)-\(i)") }
            }
        }
        for thread in threads { thread.stop() }
        threads = []
        try events.flush(timeoutMilliseconds: 20_000)
        let stored = try serverEvents().compactMap { $0["name"]?.stringValue }
        XCTAssertEqual(stored.count, 4 * perThread)
        XCTAssertEqual(Set(stored).count, 4 * perThread)
        XCTAssertEqual(events.queuedCount, 0)
        // What is left is at most one fresh file per stripe, all empty.
        XCTAssertTrue(journalFiles().count <= EventJournal.stripeCount, "imported journals are removed: \(journalFiles())")
        XCTAssertEqual(try journalFiles().map { try readFile($0).count }.reduce(0, +), 0)
        events.close(timeoutMilliseconds: 0)
    }

    func testIdentityAndSessionChangesReachTheNextEvent() throws {
        // The identity part of an event is built once per change, not per event.
        let events = try open(quiet())
        try events.track("anonymous")
        try events.identify(userID: "u-1")
        try events.track("identified")
        try events.startSession()
        try events.track("new session")
        try events.reset()
        try events.track("after reset")
        try events.flush(timeoutMilliseconds: 5000)
        var byName: [String: JSON] = [:]
        for event in try serverEvents() { byName[event["name"]?.stringValue ?? ""] = event }
        XCTAssertTrue(byName["anonymous"]?["user_id"]?.kind == .null)
        XCTAssertEqual(byName["identified"]?["user_id"]?.stringValue, "u-1")
        XCTAssertEqual(byName["new session"]?["user_id"]?.stringValue, "u-1")
        XCTAssertTrue(byName["after reset"]?["user_id"]?.kind == .null)
        XCTAssertEqual(byName["identified"]?["session_id"]?.stringValue, byName["anonymous"]?["session_id"]?.stringValue)
        XCTAssertNotEqual(byName["new session"]?["session_id"]?.stringValue, byName["identified"]?["session_id"]?.stringValue)
        XCTAssertEqual(Set(byName.values.compactMap { $0["anonymous_id"]?.stringValue }), [events.anonymousID])
        events.close(timeoutMilliseconds: 0)
    }
}
