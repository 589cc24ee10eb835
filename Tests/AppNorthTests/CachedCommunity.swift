// The seed page's "Cache community reads" snippet (CachedCommunity.swift),
// verbatim inside `#if canImport(SwiftUI)`. This is the one allowed gap on
// Linux: SwiftUI does not exist there, so this file compiles only on Apple
// platforms. What the view renders, AppNorthCommunityModel, is tested on
// Linux in CommunityModelTests.
#if canImport(SwiftUI)
import SwiftUI
import AppNorth

struct CachedCommunity: View {
    let client: AppNorthClient
    let cache: AppNorthReadCache

    var body: some View {
        AppNorthView(client: client, cache: cache)
    }
}
#endif
