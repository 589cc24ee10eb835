import Foundation

#if !canImport(Darwin)
extension NotificationCenter {
    /// Foundation's block-based `addObserver`, with a discardable result as
    /// on Apple platforms (where the method comes from Objective-C, whose
    /// results Swift lets callers drop). swift-corelibs-foundation declares
    /// it in Swift without `@discardableResult`, so the seed's snippet,
    /// which keeps no token, warned on Linux. Only a nil or class `object`
    /// comes here (`AnyObject?` is the more specific match); the call goes
    /// straight on to Foundation's method.
    @discardableResult
    public func addObserver(forName name: Notification.Name?, object: AnyObject?, queue: OperationQueue?,
                            using block: @escaping @Sendable (Notification) -> Void) -> any NSObjectProtocol {
        let sender: Any? = object
        return addObserver(forName: name, object: sender, queue: queue, using: block)
    }
}
#endif
