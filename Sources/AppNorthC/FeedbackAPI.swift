import AppNorthCore
import CAppNorthAPI

// appnorth_feedback_*: a builder the host fills before submitting.

final class FeedbackBuilder {
    var feedback = AppNorthFeedback()
}

@c @implementation
public func appnorth_feedback_new() -> OpaquePointer? {
    Handle.make(FeedbackBuilder())
}

@c @implementation
public func appnorth_feedback_free(_ feedback: OpaquePointer?) {
    Handle.release(feedback, as: FeedbackBuilder.self)
}

@c @implementation
public func appnorth_feedback_set_text(_ feedback: OpaquePointer?, _ text: UnsafePointer<CChar>?,
                                       _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let builder = try Handle.get(feedback, as: FeedbackBuilder.self, "feedback")
        let text = try requiredString(text, "text", maxBytes: 4 * AppNorthFeedback.maxTextCharacters)
        try AppNorthFeedback.checkText(text)
        builder.feedback.text = text
    }
}

@c @implementation
public func appnorth_feedback_set_diagnostics(_ feedback: OpaquePointer?, _ json: UnsafePointer<CChar>?,
                                              _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let builder = try Handle.get(feedback, as: FeedbackBuilder.self, "feedback")
        let text = try optionalString(json, "diagnostics_json", maxBytes: AppNorthFeedback.maxDiagnosticsBytes)
        if let text { try AppNorthFeedback.checkDiagnostics(text) }
        builder.feedback.diagnosticsJSON = text
    }
}

@c @implementation
public func appnorth_feedback_add_screenshot(_ feedback: OpaquePointer?, _ bytes: UnsafeRawPointer?, _ length: Int,
                                             _ contentType: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let builder = try Handle.get(feedback, as: FeedbackBuilder.self, "feedback")
        let bytes = try required(bytes, "bytes")
        // size_t arrives as Int: a huge size_t (a failed read()'s -1) is negative here.
        guard length >= 0, length <= AppNorthFeedback.maxScreenshotBytes else {
            throw AppNorthError.tooLarge("screenshot is \(UInt(bitPattern: length)) bytes; the limit is \(AppNorthFeedback.maxScreenshotBytes)")
        }
        let shot = AppNorthFeedback.Screenshot(contentType: try requiredString(contentType, "content_type"),
                                               bytes: Array(UnsafeRawBufferPointer(start: bytes, count: length)))
        try AppNorthFeedback.checkScreenshot(shot, count: builder.feedback.screenshots.count)
        builder.feedback.screenshots.append(shot)
    }
}
