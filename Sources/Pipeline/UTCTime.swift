import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// UTC timestamps for the album, written and read without Foundation's date formatters: on Linux
/// those load ICU's calendar and locale data, about 5 MiB of a recorder's resident memory.
enum UTCTime {
    /// `2026-11-23T14:30:05Z`, the form `ISO8601DateFormatter` writes (and older albums hold).
    static func iso8601(_ date: Date) -> String {
        let (t, _) = fields(date)
        return "\(pad(Int(t.tm_year) + 1900, 4))-\(pad(Int(t.tm_mon) + 1, 2))-\(pad(Int(t.tm_mday), 2))T"
            + "\(pad(Int(t.tm_hour), 2)):\(pad(Int(t.tm_min), 2)):\(pad(Int(t.tm_sec), 2))Z"
    }

    /// `20261123T143005.123Z`: sorts like the time and is safe in file names.
    static func compact(_ date: Date) -> String {
        let (t, milliseconds) = fields(date)
        return "\(pad(Int(t.tm_year) + 1900, 4))\(pad(Int(t.tm_mon) + 1, 2))\(pad(Int(t.tm_mday), 2))T"
            + "\(pad(Int(t.tm_hour), 2))\(pad(Int(t.tm_min), 2))\(pad(Int(t.tm_sec), 2)).\(pad(milliseconds, 3))Z"
    }

    /// `2026-11-23T15:30:05.123+01:00`: the local time with its offset from UTC, to the millisecond
    /// (what the API and webhooks give as a clip's `started_at` and `ended_at`).
    static func iso8601WithOffset(_ date: Date) -> String {
        let since1970 = date.timeIntervalSince1970
        var seconds = time_t(since1970.rounded(.down))
        var t = tm()
        localtime_r(&seconds, &t)
        let milliseconds = min(999, max(0, Int((since1970 - Double(seconds)) * 1000)))
        let offset = Int(t.tm_gmtoff) / 60
        let sign = offset < 0 ? "-" : "+"
        return "\(pad(Int(t.tm_year) + 1900, 4))-\(pad(Int(t.tm_mon) + 1, 2))-\(pad(Int(t.tm_mday), 2))T"
            + "\(pad(Int(t.tm_hour), 2)):\(pad(Int(t.tm_min), 2)):\(pad(Int(t.tm_sec), 2)).\(pad(milliseconds, 3))"
            + "\(sign)\(pad(abs(offset) / 60, 2)):\(pad(abs(offset) % 60, 2))"
    }

    /// The date of an ``iso8601(_:)`` string; nil for anything else.
    static func parseISO8601(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z") else { return nil }
        func number(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for byte in bytes[start..<(start + count)] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
              let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var t = tm()
        t.tm_year = Int32(year - 1900)
        t.tm_mon = Int32(month - 1)
        t.tm_mday = Int32(day)
        t.tm_hour = Int32(hour)
        t.tm_min = Int32(minute)
        t.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: TimeInterval(timegm(&t)))
    }

    private static func fields(_ date: Date) -> (tm, milliseconds: Int) {
        let since1970 = date.timeIntervalSince1970
        var seconds = time_t(since1970.rounded(.down))
        var t = tm()
        gmtime_r(&seconds, &t)
        return (t, min(999, max(0, Int((since1970 - Double(seconds)) * 1000))))
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
