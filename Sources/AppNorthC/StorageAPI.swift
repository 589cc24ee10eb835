import AppNorthCore
import CAppNorthAPI

// appnorth_storage_* and appnorth_buffer_set.

/// Any storage the queue or the cache can use.
typealias SDKStorage = AppNorthOfflineQueueStorage & AppNorthReadCacheStorage

final class StorageBox {
    let storage: any SDKStorage
    /// The logger of queues and caches opened on it from now on.
    let logger = Lock<Logger>(.silent, level: LockClass.storageLogger)
    init(_ storage: any SDKStorage) { self.storage = storage }
}

/// The largest blob a host load callback may hand over (the header's
/// APPNORTH_MAX_BUFFER_BYTES).
private let maxBufferBytes = Int(APPNORTH_MAX_BUFFER_BYTES)

/// The buffer a host load callback fills.
final class LoadBuffer {
    var bytes: [UInt8]?
}

/// Storage through the host's load/save callbacks.
final class HostCallbackStorage: SDKStorage, @unchecked Sendable {
    // @unchecked: the host promises its callbacks and user_data are usable
    // from any thread, as the header requires.
    let loadFn: appnorth_storage_load_fn
    let saveFn: appnorth_storage_save_fn
    let releaseFn: appnorth_release_fn?
    let userData: UnsafeMutableRawPointer?

    init(load: appnorth_storage_load_fn, save: appnorth_storage_save_fn, release: appnorth_release_fn?,
         userData: UnsafeMutableRawPointer?) {
        loadFn = load
        saveFn = save
        releaseFn = release
        self.userData = userData
    }

    deinit { ThreadCalls.callback { releaseFn?(userData) } }

    func load() throws -> [UInt8]? {
        let buffer = LoadBuffer()
        let rc = Handle.lend(buffer, refused: -1) { loadFn(userData, $0) }
        guard rc == 0 else { throw AppNorthError.storage("the host storage load callback returned \(rc)") }
        return buffer.bytes
    }

    func save(_ data: [UInt8]?) throws {
        let rc: Int32 = ThreadCalls.callback(refused: -1) {
            guard let data else { return saveFn(userData, nil, 0) }
            return data.withUnsafeBytes { saveFn(userData, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), $0.count) }
        }
        guard rc == 0 else { throw AppNorthError.storage("the host storage save callback returned \(rc)") }
    }
}

@c @implementation
public func appnorth_buffer_set(_ buffer: OpaquePointer?, _ bytes: UnsafeRawPointer?, _ length: Int,
                                _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let box = try Handle.get(buffer, as: LoadBuffer.self, "buffer")
        // size_t arrives as Int: above Int.max it is negative here.
        guard length >= 0, length <= maxBufferBytes else {
            throw AppNorthError.tooLarge("length is \(UInt(bitPattern: length)) bytes; the limit is \(maxBufferBytes)")
        }
        if length == 0 {
            box.bytes = []
        } else {
            box.bytes = Array(UnsafeRawBufferPointer(start: try required(bytes, "bytes"), count: length))
        }
    }
}

private func makeStorage(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ err: ErrorOut?,
                         _ build: () throws -> any SDKStorage) -> Int32 {
    out?.pointee = nil
    return guarded(err) {
        let out = try required(out, "out_storage")
        out.pointee = Handle.make(StorageBox(try build()))
    }
}

@c @implementation
public func appnorth_storage_new_sqlite(_ dataDir: UnsafePointer<CChar>?, _ name: UnsafePointer<CChar>?,
                                        _ outStorage: UnsafeMutablePointer<OpaquePointer?>?, _ err: ErrorOut?) -> Int32 {
    makeStorage(outStorage, err) {
        let directory = try DataDirectory(path: try requiredString(dataDir, "data_dir"))
        let storeName = try requiredString(name, "name")
        return try SQLiteBlobStorage(store: try SQLiteStore(directory: directory), name: storeName)
    }
}

@c @implementation
public func appnorth_storage_new_memory(_ outStorage: UnsafeMutablePointer<OpaquePointer?>?, _ err: ErrorOut?) -> Int32 {
    makeStorage(outStorage, err) { MemoryStorage() }
}

@c @implementation
public func appnorth_storage_new_callbacks(_ load: appnorth_storage_load_fn?, _ save: appnorth_storage_save_fn?,
                                           _ release: appnorth_release_fn?, _ userData: UnsafeMutableRawPointer?,
                                           _ outStorage: UnsafeMutablePointer<OpaquePointer?>?,
                                           _ err: ErrorOut?) -> Int32 {
    makeStorage(outStorage, err) {
        HostCallbackStorage(load: try required(load, "load"), save: try required(save, "save"),
                            release: release, userData: userData)
    }
}

@c @implementation
public func appnorth_storage_free(_ storage: OpaquePointer?) {
    Handle.release(storage, as: StorageBox.self)
}

@c @implementation
public func appnorth_storage_erase(_ storage: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let box = try Handle.get(storage, as: StorageBox.self, "storage")
        try box.storage.save(nil)
    }
}

@c @implementation
public func appnorth_storage_set_logger(_ storage: OpaquePointer?, _ fn: appnorth_log_fn?, _ minLevel: Int32,
                                        _ userData: UnsafeMutableRawPointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let box = try Handle.get(storage, as: StorageBox.self, "storage")
        let logger = try hostLogger(fn, minLevel, userData)
        box.logger.withLock { $0 = logger }
    }
}

extension LockClass {
    /// `StorageBox.logger`: the logger of a C storage's queues and caches.
    package static let storageLogger = LockClass.leaf("StorageBox.logger")
}
