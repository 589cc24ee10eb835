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
// these are async and take `Data`, as the seed page shows). Swift's
// shadowing rule settles them: a module's own declaration shadows one of a
// module it imports, so a host that imports `AppNorth` gets these. Inside
// this module the core's are spelled `AppNorthCore.X`. A host that also
// writes `import AppNorthCore` must qualify those four names itself.
//
// Each file here that uses core types also writes `import AppNorthCore`
// itself, so incremental builds recompile it when a core type changes.
@_exported import AppNorthCore
