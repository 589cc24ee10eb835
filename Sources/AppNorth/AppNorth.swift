// AppNorth: the Swift API for Swift hosts (the seeds' API), built on
// Foundation over the Foundation-free core. libappnorth.so never links this
// module: it is built from AppNorthCore and AppNorthC only.
//
// How the names fit together. The core is re-exported (its `public`
// declarations: the rest is `package`, see docs/public-api.md), so
// `import AppNorth` alone gives a host `AppNorthClient`, its configuration
// and credential, `IdeaQuery`, `AppNorthFeedback`, `AppNorthError`, the
// clocks and the rest (`AppNorthOfflineQueueError` is this module's own:
// the core reports a full queue as `AppNorthError.queueFull`). Four names
// exist in both modules with different shapes: `AppNorthOfflineQueue`,
// `AppNorthReadCache`, `AppNorthOfflineQueueStorage` and
// `AppNorthReadCacheStorage` (the core's are synchronous and take bytes;
// these are async and take `Data`, as the seed page shows). The core's are
// `package`, so a host sees only these; inside this module the core's are
// spelled `AppNorthCore.X`.
//
// Each file here that uses core types also writes `import AppNorthCore`
// itself, so incremental builds recompile it when a core type changes.
@_exported import AppNorthCore
