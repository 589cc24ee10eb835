import XCTest
@testable import AppNorthCore

/// The journal's two record versions: "ANJ2" (`checksum2`), which `track`
/// writes, and "ANJ1" (`checksum`), which earlier versions wrote and which
/// is still read.
final class JournalVersionTests: EventsTestCase {
    override class var isolatedApp: Bool { true }

    func payload(_ name: String) -> [UInt8] {
        EventPayload.build(id: Random.uuidV7(unixMilliseconds: 1_700_000_000_000), name: name, timestampMs: 1_700_000_000_000,
                           propertiesJSON: #"{"n":1}"#, anonymousID: "anon", userID: nil, sessionID: "s")
    }

    func names(_ decoded: JournalRecord.Decoded) -> [String] {
        decoded.events.map { (try? JSON.parse(String(decoding: $0.payload, as: UTF8.self)))?["name"]?.stringValue ?? "?" }
    }

    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) } }

    /// Both checksums pinned to values computed by the Python inspector's
    /// own implementations (bindings/python/appnorth/_inspector.py), at the
    /// lengths where their loops and tails change: (length, ANJ2, ANJ1).
    static let knownAnswers: [(Int, UInt64, UInt64)] = [
        (0, 0xC88715F116B08ECF, 0x98C556105AADD8BC),
        (1, 0x0A4BEEF07DED9590, 0x5295492E15A14A87),
        (7, 0x13F684BF0BB67FF8, 0x9BD2892B2ED78BAE),
        (8, 0x9EA339277734C075, 0xD3F62B0F891A213E),
        (15, 0x1F1F14E370D30547, 0xDA01BD9904A8D40F),
        (16, 0xA2FF071E150878E3, 0xE9213C3C5A3F800D),
        (17, 0xC782EBE6C86C2AB2, 0x9D9A1860E688F79F),
        (31, 0x1824D390D129990C, 0xE5F090DE646BC665),
        (32, 0x3D5AD58AAE559CA4, 0xCE7D2CAC2730B1EC),
        (33, 0x663475109130BF71, 0xA01A7E7AE2A5E1C5),
        (48, 0x2A84F4A6A5AD79DA, 0x51FE1761A26C99E6),
        (100, 0x938F9C4851A1F2C5, 0x7744FC2D1916A7B5),
    ]

    func testBothChecksumsMatchTheInspectorsImplementations() {
        for (count, v2, v1) in Self.knownAnswers {
            Self.pattern(count).withUnsafeBytes { p in
                XCTAssertEqual(JournalRecord.checksum2(length: UInt32(count), p), v2, "ANJ2, \(count) bytes")
                XCTAssertEqual(JournalRecord.checksum(length: UInt32(count), p), v1, "ANJ1, \(count) bytes")
            }
        }
    }

    /// `checksum2` against a plain reading of its definition (16-byte
    /// blocks, the last 1-15 bytes as the last sixteen), every length to
    /// 200 and random bytes.
    func testChecksum2FollowsItsDefinition() {
        var rng = SystemRandomNumberGenerator()
        for count in 0...200 {
            for _ in 0..<5 {
                let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let fast = bytes.withUnsafeBytes { JournalRecord.checksum2(length: UInt32(count), $0) }
                XCTAssertEqual(fast, Self.reference(bytes), "\(count) bytes")
            }
        }
    }

    static func reference(_ bytes: [UInt8]) -> UInt64 {
        func word(_ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << UInt64(8 * $1) } }
        func mum(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let (high, low) = a.multipliedFullWidth(by: b)
            return high ^ low
        }
        let s: [UInt64] = [0xA076_1D64_78BD_642F, 0xFF03_7ED1_A0B4_28DB, 0x8EBC_6AF0_9C88_C6E3, 0x5899_65CC_7537_4CC3,
                           0x1D8E_4E27_C47D_124F]
        var h = s[0] ^ UInt64(bytes.count)
        let blocks = bytes.count / 16
        for b in 0..<blocks { h = mum(word(16 * b) ^ s[1], word(16 * b + 8) ^ h) }
        if bytes.count % 16 != 0 {
            let count = bytes.count
            var a: UInt64 = 0, b: UInt64 = 0
            if count >= 16 {
                (a, b) = (word(count - 16), word(count - 8))
            } else if count >= 8 {
                (a, b) = (word(0), word(count - 8))
            } else {
                for k in 0..<count { a |= UInt64(bytes[k]) << UInt64(8 * k) }
            }
            h = mum(a ^ s[2], b ^ h)
        }
        return mum(h ^ s[3], UInt64(bytes.count) ^ s[4])
    }

    func testTrackWritesVersion2AndAFileMayHoldBoth() {
        let new = JournalRecord.encode(payload("new"))
        XCTAssertEqual(Array(new.prefix(4)), Array("ANJ2".utf8))
        let old = JournalRecord.encode(payload("old"), version1: true)
        XCTAssertEqual(Array(old.prefix(4)), Array("ANJ1".utf8))
        let decoded = JournalRecord.decode(old + new + old + new)
        XCTAssertEqual(names(decoded), ["old", "new", "old", "new"])
        XCTAssertEqual(decoded.damaged, 0)
    }

    /// A record whose magic names the other version fails its checksum:
    /// the version decides the checksum, not whichever of the two holds.
    func testTheMagicDecidesTheChecksum() {
        let c = JournalRecord.encode(payload("c"))
        for version1 in [false, true] {
            var swapped = JournalRecord.encode(payload("b"), version1: version1)
            swapped[3] = version1 ? UInt8(ascii: "2") : UInt8(ascii: "1")
            let decoded = JournalRecord.decode(swapped + c)
            XCTAssertEqual(names(decoded), ["c"], version1 ? "ANJ1 relabelled ANJ2" : "ANJ2 relabelled ANJ1")
            XCTAssertEqual(decoded.damaged, 1)
        }
    }

    /// Every single-bit flip in an ANJ2 record (header and payload) is
    /// caught; so is every cut, for both versions.
    func testEveryBitFlipAndEveryCutIsDamage() {
        let record = JournalRecord.encode(payload("b")), c = JournalRecord.encode(payload("c"))
        for at in 0..<record.count {
            for bit in 0..<8 {
                var flipped = record
                flipped[at] ^= UInt8(1) << UInt8(bit)
                let decoded = JournalRecord.decode(flipped + c)
                XCTAssertEqual(names(decoded), ["c"], "byte \(at) bit \(bit)")
                if names(decoded) != ["c"] { return }
            }
        }
        for version1 in [false, true] {
            let whole = JournalRecord.encode(payload("b"), version1: version1)
            for cut in 1..<whole.count {
                XCTAssertEqual(names(JournalRecord.decode(Array(whole.prefix(cut)))), [], "cut at \(cut)")
            }
        }
    }

    /// A journal an earlier version left (ANJ1 records only) is imported
    /// at open, as one this version left is.
    func testAnEndedProcessVersion1JournalIsImportedAtOpen() throws {
        let bytes = JournalRecord.encode(payload("old1"), version1: true) + JournalRecord.encode(payload("old2"), version1: true)
        try assertLeftJournalIsImported(bytes + JournalRecord.encode(payload("torn"), version1: true).prefix(30),
                                        name: "events-999993-0123456789abcdef.journal")
    }
}
