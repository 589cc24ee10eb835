/// How many transfers per origin run at once, and who waits: the
/// first-in, first-out turn-taking of `TransferEngine`, as a value
/// (no threads, no curl), so that its rules are tested on their own.
///
/// `arrive` returns the job when its origin has a free place (the caller
/// starts it) and queues it otherwise; `leave` frees the place of a job
/// that ended and returns the next waiting job of that origin, which
/// takes the place over.
struct AdmissionQueue<Job> {
    let perOrigin: Int
    private var active: [String: Int] = [:]
    private var waiting: [String: [Job]] = [:]
    private(set) var waitingCount = 0

    init(perOrigin: Int) {
        self.perOrigin = max(1, perOrigin)
    }

    var isEmpty: Bool { waitingCount == 0 }

    func running(origin: String) -> Int { active[origin, default: 0] }

    mutating func arrive(_ job: Job, origin: String) -> Job? {
        let count = active[origin, default: 0]
        if count < perOrigin && waiting[origin] == nil {
            active[origin] = count + 1
            return job
        }
        waiting[origin, default: []].append(job)
        waitingCount += 1
        return nil
    }

    mutating func leave(origin: String) -> Job? {
        if let next = waiting[origin]?.first {
            // In place: the queue is not copied for each turn.
            waiting[origin]?.removeFirst()
            if waiting[origin]?.isEmpty == true { waiting[origin] = nil }
            waitingCount -= 1
            return next  // takes over the place: the count stays
        }
        let left = active[origin, default: 1] - 1
        active[origin] = left > 0 ? left : nil
        return nil
    }

    /// Takes out the waiting jobs that match, in order; they never held a place.
    mutating func removeWaiting(where matches: (Job) -> Bool) -> [Job] {
        guard waitingCount > 0 else { return [] }
        var removed: [Job] = []
        for (origin, queue) in waiting {
            var kept: [Job] = []
            for job in queue {
                if matches(job) { removed.append(job) } else { kept.append(job) }
            }
            waiting[origin] = kept.isEmpty ? nil : kept
        }
        waitingCount -= removed.count
        return removed
    }
}
