/// The library's version; keep in step with include/appnorth.h.
public enum AppNorthVersion {
    public static let major = 0
    public static let minor = 4
    public static let patch = 0
    public static let string = "\(major).\(minor).\(patch)"
    public static let number = major * 10000 + minor * 100 + patch
}
