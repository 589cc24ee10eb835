import Glibc

/// The bundled tier: a JSON object file the host ships (the seed's
/// appdna-config.json), read once at open.
enum BundledConfig {
    static let maxBytes = 16 << 20

    static func load(path: String) throws(AppNorthError) -> ConfigDocument {
        guard !path.isEmpty else { throw .invalidArgument("bundled config path is empty") }
        let bytes = try readFile(path)
        return try ConfigDocument(bytes: bytes, what: "bundled config file \(path)")
    }

    private static func readFile(_ path: String) throws(AppNorthError) -> [UInt8] {
        guard let file = fopen(path, "rb") else {
            throw .storage("cannot read bundled config file \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n > 0 { bytes += chunk[0..<n] }
            if bytes.count > maxBytes {
                throw .tooLarge("bundled config file \(path) is larger than \(maxBytes) bytes")
            }
            if n < chunk.count {
                if ferror(file) != 0 {
                    throw .storage("cannot read bundled config file \(path): \(String(cString: strerror(errno)))")
                }
                break
            }
        }
        return bytes
    }
}
