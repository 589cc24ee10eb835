// The allocation-free JSON validator against jansson, its reference: for
// any bytes, in both integer modes, both accept or both refuse, and agree
// on whether the top level is an object. What track() runs
// (JSON.validateObject) gives jansson's object verdict.
import CJansson
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    var janssonObject = false
    for integersAsReals in [true, false] {
        let flags = integersAsReals ? size_t(JSON_DECODE_INT_AS_REAL) : 0
        let reference = try? JSON.parse(UnsafeRawBufferPointer(bytes), what: "fuzz", flags: flags)
        let verdict = Result { () throws(JSONValidator.Failure) in
            try JSONValidator.validate(bytes, integersAsReals: integersAsReals)
        }
        let mode = integersAsReals ? "integers as reals" : "integers"
        switch (verdict, reference) {
        case (.success(let top), let value?):
            require((top == .object) == (value.kind == .object), "\(mode): top level \(top), jansson \(value.kind)")
            if integersAsReals { janssonObject = value.kind == .object }
        case (.success(let top), nil):
            require(false, "\(mode): the validator accepts (\(top)) what jansson refuses")
        case (.failure(let failure), let value?):
            require(false, "\(mode): the validator refuses (\(failure)) what jansson accepts (\(value.kind))")
        case (.failure(let failure), nil):
            require((0...size).contains(failure.position), "\(mode): failure position \(failure.position) of \(size)")
        }
    }
    // The String path track() takes (only valid UTF-8 reaches it).
    let text = String(decoding: bytes, as: UTF8.self)
    if text.utf8.elementsEqual(bytes) {
        let accepted = (try? JSON.validateObject(text, what: "fuzz")) != nil
        require(accepted == janssonObject, "validateObject says \(accepted), jansson \(janssonObject)")
    }
    return 0
}
