import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers a request whose declared body is over its route's limit with 413 at once, before any
/// of the body is read (and closes the connection, so the rest is never read either), and answers
/// `Expect: 100-continue` for the others, so clients that wait for it (curl, for bodies over 1 MiB)
/// send their body.
final class BodyLimitHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The largest body a path takes.
    let limit: @Sendable (String) -> Int
    /// Parts of a refused request are dropped until the connection closes.
    private var refusing = false

    init(limit: @escaping @Sendable (String) -> Int) {
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard case .head(let head) = part else {
            if !refusing { context.fireChannelRead(data) }
            return
        }
        let path = String((head.path ?? "/").prefix { $0 != "?" })
        let allowed = limit(path)
        if let declared = head.headerFields[.contentLength].flatMap(Int.init), declared > allowed {
            refusing = true
            let body = "{\"error\":{\"message\":\"the body of \(declared) bytes is larger than the \(allowed) bytes \(path) takes\",\"status\":413}}"
            var fields: HTTPFields = [.contentType: "application/json", .contentLength: String(body.utf8.count), .connection: "close"]
            fields[.server] = "spotter"
            context.write(wrapOutboundOut(.head(HTTPResponse(status: .contentTooLarge, headerFields: fields))), promise: nil)
            context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(string: body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
            return
        }
        if head.headerFields[.expect]?.lowercased() == "100-continue" {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
        }
        context.fireChannelRead(data)
    }
}
