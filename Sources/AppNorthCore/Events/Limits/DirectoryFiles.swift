/// What `track` counts of the directory's files beside its own figures
/// (#32: a limit is the data directory's, not a handle's): every journal
/// file in the directory, another handle's or process's too, and the
/// database file, as the file system has them. Looked at again once this
/// handle journaled four `step`s of bytes (128 KiB) since the last look,
/// or drained (its own journal shrank): the hot path reads two atomics
/// (a look every step cost `track` 83 instructions an event, callgrind).
/// Between looks this handle's own growth is added; another's shows at
/// the next look, so each handle tracking misses at most four steps of
/// the others'.
extension QueueLimits {
    /// Every journal file's bytes (from the last look, with this handle's
    /// growth since), `journaled`: this handle's journaled bytes now;
    /// `interval`: the growth after which it looks again (both at least 0:
    /// the wrapping arithmetic cannot wrap).
    @inline(__always)
    func journalFiles(journaled: Int, interval: Int) -> Int {
        let at = journalFilesAt.load(ordering: .relaxed)
        let grown = journaled &- at
        if at >= 0 && grown >= 0 && grown < interval { return journalFilesSeen.load(ordering: .relaxed) &+ grown }
        return lookAtFiles(journaled: journaled)
    }

    /// Reads the journal files' sizes (the listing is cached by the
    /// directory's time; `fstatat` without following a link, so nothing is
    /// opened) and the database file's. Events in another's journal make
    /// the directory `shared` at once (a drain clears it: `fitWAL`).
    @inline(never)
    func lookAtFiles(journaled: Int) -> Int {
        var bytes = 0, others = false
        let known = shared.load(ordering: .relaxed)
        for name in journalNames() {
            let size = journal.directory.fileSize(name)
            bytes = bytes.addingSaturating(size)
            if !known && !others && size > 0 && !journal.isOwn(name) { others = true }
        }
        if others { shared.store(true, ordering: .relaxed) }
        databaseFile.store(table.db.databaseBytes, ordering: .relaxed)
        journalFilesSeen.store(bytes, ordering: .relaxed)
        journalFilesAt.store(max(0, journaled), ordering: .relaxed)
        return bytes
    }
}
