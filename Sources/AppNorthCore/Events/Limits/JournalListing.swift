import Glibc

/// The journal files' names in the data directory, listed again only when
/// the directory changed since the last listing (#32: a listing per check,
/// several per batch, cost the flush about a tenth of its speed). A file
/// made, renamed or deleted there moves the directory's modification time;
/// a foreign journal's growth does not, and its reader sees it anyway.
///
/// File times move in clock ticks (a few milliseconds), so a change in the
/// same tick as the listing may not move the time: a listing made less than
/// `settleNanoseconds` after the directory's last change is not trusted and
/// the next look lists again (git's "racily clean" entries).
struct JournalListing: Equatable {
    var changed: timespec
    var listed: timespec
    var names: [String]
    /// Whether the directory's last change was settled when it was listed.
    var trusted: Bool { Self.nanoseconds(listed) &- Self.nanoseconds(changed) >= Self.settleNanoseconds }

    static let settleNanoseconds: Int64 = 50_000_000

    /// The cached names if `current` (the directory's time now) is the time
    /// they were listed at and the listing is trusted; nil: list again.
    func names(ifChangedAt current: timespec) -> [String]? {
        trusted && current.tv_sec == changed.tv_sec && current.tv_nsec == changed.tv_nsec ? names : nil
    }

    static func nanoseconds(_ time: timespec) -> Int64 {
        Int64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000).partialValue &+ Int64(time.tv_nsec)
    }

    static func == (a: Self, b: Self) -> Bool {
        a.names == b.names && nanoseconds(a.changed) == nanoseconds(b.changed) && nanoseconds(a.listed) == nanoseconds(b.listed)
    }
}

extension QueueLimits {
    /// The journal files' names (`EventJournal.journalNames`), from the
    /// last listing while the directory has not changed since.
    func journalNames() -> [String] {
        var info = stat()
        guard fstat(journal.directory.fd, &info) == 0 else { return journal.journalNames() }
        if let names = listing.withLock({ $0?.names(ifChangedAt: info.st_mtim) }) { return names }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let names = journal.journalNames()
        listing.withLock { $0 = JournalListing(changed: info.st_mtim, listed: now, names: names) }
        return names
    }
}
