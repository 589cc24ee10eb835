import Glibc

/// The host-given folder the SDK keeps its files in: created 0700, and every
/// file in it created 0600, since queued writes, events and identity values
/// belong to the user alone.
public struct DataDirectory: Sendable {
    public let path: String

    /// Creates the folder (and missing parents) with mode 0700. An existing
    /// folder is kept, and tightened to 0700 if it is wider.
    public init(path: String) throws(AppNorthError) {
        guard !path.isEmpty else { throw .invalidArgument("data directory path is empty") }
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.path = trimmed
        try Self.makeDirectories(trimmed)
        if chmod(trimmed, 0o700) != 0 {
            throw .storage("cannot set permissions on data directory \(trimmed): \(String(cString: strerror(errno)))")
        }
    }

    /// The path of a file inside the folder.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Creates `name` empty with mode 0600 if it does not exist, so that
    /// SQLite (which copies the main file's mode to its -wal and -shm files)
    /// never creates it with the process umask.
    public func ensurePrivateFile(_ name: String) throws(AppNorthError) -> String {
        let full = file(name)
        let fd = open(full, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage("cannot create \(full): \(String(cString: strerror(errno)))") }
        fchmod(fd, 0o600)
        close(fd)
        return full
    }

    private static func makeDirectories(_ path: String) throws(AppNorthError) {
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                throw .storage("cannot create data directory \(built): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .storage("data directory \(path) is not a directory")
        }
    }
}
