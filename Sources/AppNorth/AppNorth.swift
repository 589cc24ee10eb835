// AppNorth: the Swift API for Swift hosts (the seeds' API), built on
// Foundation over the Foundation-free core. libappnorth.so never links this
// module: it is built from AppNorthCore and AppNorthC only.
@_exported import AppNorthCore
