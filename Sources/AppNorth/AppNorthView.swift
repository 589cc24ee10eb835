#if canImport(SwiftUI)
import SwiftUI

/// The community screen: boards and ideas, fresh cached ones at once (when
/// a cache is given), then the network's. It renders an
/// `AppNorthCommunityModel`, which hosts without SwiftUI use directly.
public struct AppNorthView: View {
    @State private var model: AppNorthCommunityModel

    @MainActor
    public init(client: AppNorthClient, cache: AppNorthReadCache? = nil) {
        _model = State(initialValue: AppNorthCommunityModel(client: client, cache: cache))
    }

    public var body: some View {
        List {
            Section("Boards") {
                ForEach(model.boards) { board in
                    VStack(alignment: .leading) {
                        Text(board.name)
                        if !board.description.isEmpty {
                            Text(board.description).font(.caption).foregroundStyle(.secondary)
                        }
                    }
                }
            }
            Section("Ideas") {
                ForEach(model.ideas) { idea in
                    HStack {
                        Text(idea.title)
                        Spacer()
                        Text("\(idea.votes)").foregroundStyle(.secondary)
                    }
                }
            }
            if let error = model.error {
                Text(String(describing: error)).font(.footnote).foregroundStyle(.red)
            }
        }
        .overlay {
            if model.isLoading && model.boards.isEmpty && model.ideas.isEmpty { ProgressView() }
        }
        .task { await model.load() }
        .refreshable { await model.load() }
    }
}
#endif
