/// Which waiting job a worker takes next, as a value (no lock, clock or
/// thread; `WorkerPool` keeps one under its lock, WorkSharesTests checks
/// it): each job belongs to a share (the non-blocking calls': their
/// client), and at most `perShare` jobs of one share run at a time. A
/// worker takes the oldest job whose share is under that limit, so a
/// client whose server never answers holds at most `perShare` workers and
/// the other clients' jobs go past its waiting ones. Jobs without a share
/// (nil) have no limit: they run in the order they came.
package struct WorkShares<Share: Hashable, Job> {
    /// Jobs of one share that may run at once (at least 1).
    package let perShare: Int

    private struct Line {
        var jobs: [(order: UInt64, job: Job)] = []
        var head = 0
        var running = 0
        var waiting: Int { jobs.count - head }
    }

    private var lines: [Share?: Line] = [:]
    private var nextOrder: UInt64 = 0
    /// Jobs added and not yet taken.
    package private(set) var waitingCount = 0

    package init(perShare: Int) {
        self.perShare = max(1, perShare)
    }

    private func limit(_ share: Share?) -> Int { share == nil ? Int.max : perShare }

    /// A job arrives: it waits until `take` hands it out.
    package mutating func add(_ job: Job, share: Share?) {
        lines[share, default: Line()].jobs.append((nextOrder, job))
        nextOrder &+= 1
        waitingCount += 1
    }

    /// Waiting jobs that a worker could take now (their share has room).
    package var runnableCount: Int {
        var count = 0
        for (share, line) in lines where line.waiting > 0 {
            count += min(line.waiting, max(0, limit(share) - line.running))
        }
        return count
    }

    /// Hands out the oldest job whose share has room, and counts it as
    /// running until `finished(share)`. Nil when none may run now.
    package mutating func take() -> (share: Share?, job: Job)? {
        var best: (share: Share?, order: UInt64)?
        for (share, line) in lines where line.waiting > 0 && line.running < limit(share) {
            let order = line.jobs[line.head].order
            if let best, best.order <= order { continue }
            best = (share, order)
        }
        // Not `best?.share`: optional chaining flattens, and the jobs
        // without a share (nil) would never be handed out.
        guard let share = best.map({ $0.share }), var line = lines[share] else { return nil }
        let job = line.jobs[line.head].job
        line.head += 1
        if line.head == line.jobs.count {
            line.jobs.removeAll(keepingCapacity: true)
            line.head = 0
        }
        line.running += 1
        lines[share] = line
        waitingCount -= 1
        return (share, job)
    }

    /// A job of `share` that `take` handed out has ended.
    package mutating func finished(_ share: Share?) {
        guard var line = lines[share] else { return }
        line.running = max(0, line.running - 1)
        lines[share] = line.running == 0 && line.waiting == 0 ? nil : line
    }

    /// Takes back the job of `share` added last (it could not be run).
    package mutating func removeNewest(share: Share?) {
        guard var line = lines[share], line.waiting > 0 else { return }
        line.jobs.removeLast()
        waitingCount -= 1
        lines[share] = line.running == 0 && line.waiting == 0 ? nil : line
    }

    /// Jobs of `share` running now (for tests).
    package func running(_ share: Share?) -> Int { lines[share]?.running ?? 0 }
}
