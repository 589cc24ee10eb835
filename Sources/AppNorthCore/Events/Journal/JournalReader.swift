import Glibc

/// A journal file read a window at a time: an import, a census or an
/// orphan's recovery walks its records without holding the file in
/// memory. The window is `windowBytes` (256 KiB), or one record when a
/// record is longer (at most `JournalRecord.maxPayload` plus its header),
/// so memory does not grow with the file's size.
///
/// Offsets are the file's. The size is taken when the reader is made: a
/// file another process is still appending to is read up to that size
/// (its later records are seen by the next reader), as a whole read was.
/// The descriptor is the caller's: the reader never closes it.
final class JournalReader {
    static let windowBytes = 256 << 10

    let fd: Int32
    let path: String
    /// The bytes the file holds (less if it shrank while being read).
    private(set) var size: Int
    /// The window: `bytes` are the file's from `base` on.
    private var base = 0
    private var bytes: [UInt8] = []
    private let windowBytes: Int

    init(fd: Int32, path: String, windowBytes: Int = JournalReader.windowBytes) throws(AppNorthError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw .storage("cannot read the event journal \(path): \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        self.path = path
        size = Int(clamping: max(0, info.st_size))
        self.windowBytes = max(JournalRecord.headerSize, windowBytes)
    }

    /// The bytes held in memory now (for tests).
    var windowCount: Int { bytes.count }

    /// The first sound record at or after `position`, as
    /// `JournalRecord.next` gives it for the whole file: its offset, the
    /// offset after it and the damaged stretches skipped before it; at the
    /// end `event` is nil; nil when nothing is left. Never traps.
    func next(from position: Int) throws(AppNorthError) -> (event: JournalRecord.Event?, start: Int, end: Int, damaged: Int)? {
        var position = max(0, position)
        guard position < size else { return nil }
        var damaged = 0, inDamage = false, need = JournalRecord.headerSize
        while true {
            try load(from: position, covering: need)
            let complete = base + bytes.count >= size
            switch JournalRecord.scan(bytes, from: position - base, complete: complete, inDamage: inDamage) {
            case .none:
                return nil
            case .record(let event, let start, let end, let skipped):
                return (event, base + start, base + end, damaged + skipped)
            case .more(let at, let needed, let skipped, let stillDamaged):
                damaged += skipped
                inDamage = stillDamaged
                position = base + at
                need = needed
            }
        }
    }

    /// Makes the window hold the file's bytes from `position` on: at least
    /// `covering` of them (up to the end of the file), read afresh when the
    /// window does not.
    private func load(from position: Int, covering: Int) throws(AppNorthError) {
        let wanted = min(size - position, max(covering, 1))
        if position >= base, position + wanted <= base + bytes.count { return }
        let length = min(size - position, max(covering, windowBytes))
        var window = [UInt8](repeating: 0, count: length)
        var filled = 0
        while filled < length {
            let n = window.withUnsafeMutableBytes { buffer -> Int in
                guard let start = buffer.baseAddress else { return 0 }
                return pread(fd, start + filled, length - filled, off_t(position + filled))
            }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .storage("cannot read the event journal \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            filled += n
        }
        if filled < length {
            // The file shrank meanwhile: it ends here.
            window.removeSubrange(filled...)
            size = position + filled
        }
        bytes = window
        base = position
    }
}
