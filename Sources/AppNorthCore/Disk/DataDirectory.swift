import Glibc

/// The host-given folder the SDK keeps its files in. Another local user is
/// an attacker (docs/security.md), so the folder is opened once, checked,
/// and every file in it is reached through that one descriptor:
///
/// - the path's last component must be a real directory, never a symbolic
///   link (`O_DIRECTORY|O_NOFOLLOW`);
/// - it must belong to the effective uid and be writable by nobody else:
///   a folder another user made or can write to is refused (`.storage`,
///   "unsafe data directory"), the rule of tmux and the XDG runtime
///   directory. Made by this user but readable by others (an older
///   version, a host's umask): it is ours, so it is tightened to 0700;
/// - the descriptor is kept for the handle's life, so swapping the path
///   after open changes nothing; every file is opened with `openat` and
///   `O_NOFOLLOW`, new files are made `O_CREAT|O_EXCL` under unpredictable
///   names and renamed into place with `renameat`;
/// - a file read from it is used only when it is a regular file of the
///   effective uid with one link (`adoptable`).
package final class DataDirectory: Sendable {
    /// The path as given (trailing slashes removed), for messages.
    package let path: String
    /// The folder's descriptor, open until this object goes.
    package let fd: Int32
    /// The folder's canonical absolute path (no symbolic link in it) when
    /// it was opened: where SQLite, which takes paths, is pointed.
    package let canonicalPath: String
    /// The folder's identity (device and inode), the same whatever path
    /// names it.
    package let identity: String

    /// Creates the folder (and missing parents) with mode 0700, or opens
    /// the existing one, and checks it (see above).
    package init(path: String) throws(AppNorthError) {
        guard !path.isEmpty else { throw .invalidArgument("data directory path is empty") }
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.path = trimmed
        try Self.makeDirectories(trimmed)
        let fd = open(trimmed, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = errno == ELOOP || errno == ENOTDIR ? "it is a symbolic link or not a directory"
                                                            : String(cString: strerror(errno))
            throw .storage("unsafe data directory \(trimmed): \(reason)")
        }
        var info = stat()
        do throws(AppNorthError) {
            guard fstat(fd, &info) == 0 else { throw .storage("cannot stat data directory \(trimmed): \(String(cString: strerror(errno)))") }
            try Self.checkOwnership(info, trimmed)
            if UInt32(info.st_mode) & 0o077 != 0 && fchmod(fd, 0o700) != 0 {
                throw .storage("cannot set permissions on data directory \(trimmed): \(String(cString: strerror(errno)))")
            }
            canonicalPath = try Self.canonicalPath(of: fd, info, trimmed)
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
        identity = "\(info.st_dev):\(info.st_ino)"
    }

    deinit { close(fd) }

    /// The path of a file inside the folder, for messages.
    package func file(_ name: String) -> String { path + "/" + name }

    // MARK: Files

    /// Opens an existing file of the folder (never following a link; a
    /// FIFO does not block). nil when there is none. Anything but a
    /// regular file of the effective uid with one link is refused.
    package func openExisting(_ name: String, writable: Bool = false) throws(AppNorthError) -> Int32? {
        let fd = openat(self.fd, name, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw refusal(name, errno == ELOOP ? "it is a symbolic link" : String(cString: strerror(errno)))
        }
        do throws(AppNorthError) {
            try adoptable(fd, name)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Opens `name` read-write, making it (mode 0600) when it does not
    /// exist; an existing one must be `adoptable`, and is made 0600.
    package func openOrCreate(_ name: String) throws(AppNorthError) -> Int32 {
        while true {
            if let fd = try openExisting(name, writable: true) {
                fchmod(fd, 0o600)
                return fd
            }
            let fd = openat(self.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 { return fd }
            guard errno == EEXIST else { throw .storage("cannot create \(file(name)): \(String(cString: strerror(errno)))") }
            // Made by another process meanwhile: open that one.
        }
    }

    /// Makes the file `name` (mode 0600), which must not exist yet (nor a
    /// link there); writes go to its end when `appending`. Returns its
    /// descriptor, or -1 with errno set.
    package func createNew(_ name: String, appending: Bool = false) -> Int32 {
        openat(fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (appending ? O_APPEND : 0), 0o600)
    }

    /// Makes a new file (mode 0600) under a fresh unpredictable name that
    /// starts with `prefix`; returns its descriptor and name.
    package func createTemporary(_ prefix: String) throws(AppNorthError) -> (fd: Int32, name: String) {
        var reason = ""
        for _ in 0..<8 {
            let name = prefix + Random.hexToken(bytes: 8)
            let fd = createNew(name)
            if fd >= 0 { return (fd, name) }
            reason = String(cString: strerror(errno))
            if errno != EEXIST { break }
        }
        throw .storage("cannot create a file in \(path): \(reason)")
    }

    /// Renames a file of the folder (replacing `to`; a link there is
    /// replaced, not followed).
    package func rename(_ from: String, to: String) -> Bool { renameat(fd, from, fd, to) == 0 }

    /// Removes a file of the folder (a link itself, never its target).
    @discardableResult
    package func remove(_ name: String) -> Bool { unlinkat(fd, name, 0) == 0 }

    /// The size of the entry `name` (a link itself, never its target), or 0.
    package func fileSize(_ name: String) -> Int {
        var info = stat()
        return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? max(0, Int(info.st_size)) : 0
    }

    /// True when the folder holds an entry `name` (of any kind).
    package func exists(_ name: String) -> Bool {
        var info = stat()
        return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT
    }

    /// The names in the folder that pass `include`.
    package func names(where include: (String) -> Bool) -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return []
        }
        defer { closedir(dir) }
        rewinddir(dir)
        // The name is read in place up to its NUL (copying the whole
        // d_name array would read the bytes past it, which are undefined).
        guard let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name) else { return [] }
        var out: [String] = []
        while let entry = readdir(dir) {
            let name = String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
            if include(name) { out.append(name) }
        }
        return out
    }

    /// Refuses anything but a regular file of the effective uid with one
    /// link: a FIFO, a device, a file another user owns or planted, a hard
    /// link to a file elsewhere.
    package func adoptable(_ fd: Int32, _ name: String) throws(AppNorthError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw refusal(name, String(cString: strerror(errno))) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw refusal(name, "it is not a regular file") }
        guard info.st_uid == geteuid() else { throw refusal(name, "it belongs to uid \(info.st_uid), not \(geteuid())") }
        guard info.st_nlink <= 1 else { throw refusal(name, "it has \(info.st_nlink) links") }
    }

    /// Refuses, before SQLite opens them by path, names of the folder that
    /// exist but are not adoptable (`-wal`, `-shm`, `-journal`).
    package func refuseForeign(_ name: String) throws(AppNorthError) {
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(), info.st_nlink <= 1 else {
            throw refusal(name, "it is not a regular file of uid \(geteuid()) with one link")
        }
    }

    private func refusal(_ name: String, _ reason: String) -> AppNorthError {
        .storage("unsafe file \(file(name)) refused: \(reason)")
    }

    /// Creates `name` empty with mode 0600 if it does not exist, so that
    /// SQLite (which copies the main file's mode to its -wal and -shm files)
    /// never creates it with the process umask. Returns the canonical path
    /// SQLite is to open.
    package func ensurePrivateFile(_ name: String) throws(AppNorthError) -> String {
        close(try openOrCreate(name))
        return canonicalPath + "/" + name
    }

    // MARK: Opening

    private static func checkOwnership(_ info: stat, _ path: String) throws(AppNorthError) {
        guard (info.st_mode & S_IFMT) == S_IFDIR else { throw .storage("unsafe data directory \(path): not a directory") }
        guard info.st_uid == geteuid() else {
            throw .storage("unsafe data directory \(path): it belongs to uid \(info.st_uid), not this process's uid \(geteuid()); "
                           + "use a folder of your own")
        }
        let mode = UInt32(info.st_mode) & 0o7777
        guard mode & 0o022 == 0 else {
            throw .storage("unsafe data directory \(path): mode \(String(mode, radix: 8)) lets other users write to it; "
                           + "make it 0700 (after checking its files) or use a new folder")
        }
    }

    /// The folder's absolute path with no link in it, checked to name the
    /// folder opened.
    private static func canonicalPath(of fd: Int32, _ info: stat, _ path: String) throws(AppNorthError) -> String {
        var candidate = ""
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, Int(PATH_MAX))
        if n > 0 {
            candidate = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        } else if let resolved = realpath(path, nil) {
            candidate = String(cString: resolved)
            free(resolved)
        }
        var named = stat()
        guard !candidate.isEmpty, lstat(candidate, &named) == 0,
              named.st_dev == info.st_dev, named.st_ino == info.st_ino else {
            throw .storage("unsafe data directory \(path): it was moved while being opened")
        }
        return candidate
    }

    private static func makeDirectories(_ path: String) throws(AppNorthError) {
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                throw .storage("cannot create data directory \(built): \(String(cString: strerror(errno)))")
            }
        }
    }
}
