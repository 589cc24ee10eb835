import Glibc

/// Small files of the data directory read whole and replaced whole
/// (`identity.json`, `super_properties.json`): a change holds the process's
/// writer turn and a record lock on `<name>.lock`, reads the file again,
/// and replaces it atomically (write, fsync, rename from a name no other
/// writer uses), so no change overwrites another's, in any process.
extension DataDirectory {
    /// Runs `body` holding the writer turn of the file whose lock file is
    /// `lockName`: this process's lock (`IdentityWriters`), then a POSIX
    /// record lock on the lock file for other processes. Record locks,
    /// unlike flock, are not inherited by a forked child, so a child can
    /// never keep other processes waiting; they exclude processes, not
    /// threads, hence the process lock around them.
    package func withFileLock<T>(_ lockName: String, _ body: () throws(AppNorthError) -> T) throws(AppNorthError) -> T {
        try IdentityWriters.shared.lock.withLock { _ throws(AppNorthError) -> T in
            let fd = try openOrCreate(lockName)
            defer { close(fd) }  // closing releases the record lock
            var whole = Glibc.flock()
            whole.l_type = Int16(F_WRLCK)
            whole.l_whence = Int16(SEEK_SET)
            while fcntl(fd, F_SETLKW, &whole) != 0 {
                guard errno == EINTR else { throw .storage("cannot lock \(file(lockName)): \(String(cString: strerror(errno)))") }
            }
            return try body()
        }
    }

    /// The bytes of the file `name`, nil when it does not exist; at most
    /// `limit` bytes are read (a larger file reads as its first `limit + 1`).
    package func readWhole(_ name: String, limit: Int = 16 << 20) throws(AppNorthError) -> [UInt8]? {
        guard let fd = try openExisting(name) else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= limit {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }

    /// Replaces the file `name` with `bytes`: a new file under an
    /// unpredictable name (O_EXCL), synced, renamed over the old one, so
    /// nothing planted under a temporary name is written to and a reader
    /// sees the old file or the new one whole. `what` names it in errors.
    package func replaceWhole(_ name: String, with bytes: [UInt8], what: String) throws(AppNorthError) {
        let (fd, temporary) = try createTemporary(name + ".tmp-")
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, to: name) else {
            let reason = String(cString: strerror(errno))
            remove(temporary)
            throw .storage("cannot write the \(what): \(reason)")
        }
    }
}
