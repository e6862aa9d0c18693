import Foundation
import Imaging
import Testing

/// `warpedAffine` over odd sizes, padded rows and maps reaching outside the picture (run under
/// AddressSanitizer in CI): every read stays inside the pixels, and exact maps give exact pixels.
@Suite struct WarpTests {
    static func picture(width: Int, height: Int, format: PixelFormat, padding: Int) throws -> Image {
        let channels = format.bytesPerPixel, stride = width * channels + padding
        var data = [UInt8](repeating: 0, count: stride * height)
        for y in 0..<height { for x in 0..<width * channels { data[y * stride + x] = UInt8(truncatingIfNeeded: x * 7 + y * 13 + 1) } }
        return try Image(width: width, height: height, format: format, data: data, strides: [stride])
    }

    static func packed(_ image: Image) -> [UInt8] {
        let row = image.width * image.format.bytesPerPixel
        return (0..<image.height).flatMap { y in image.data[(y * image.strides[0])..<(y * image.strides[0] + row)] }
    }

    @Test(arguments: [(1, 1), (3, 5), (17, 9), (101, 7), (2, 64)])
    func identityAndWholePixelShiftsReproduceThePixels(width: Int, height: Int) throws {
        for format in [PixelFormat.rgb24, .gray8] {
            for padding in [0, 3, 64] {
                let source = try Self.picture(width: width, height: height, format: format, padding: padding)
                let same = source.warpedAffine(.identity, to: source.size)
                #expect(same.data == Self.packed(source), "\(width)x\(height) \(format) padding \(padding)")
                // One pixel left: the last column reads past the edge and takes the fill.
                let shifted = source.warpedAffine(.scale(1, 1, translate: -1, 0), to: source.size, fill: 9)
                let channels = format.bytesPerPixel
                for y in 0..<height {
                    for x in 0..<width * channels {
                        let expected = x < (width - 1) * channels ? Self.packed(source)[y * width * channels + x + channels] : 9
                        #expect(shifted.data[y * width * channels + x] == expected)
                    }
                }
            }
        }
    }

    @Test func mapsFarOutsideThePictureGiveTheFillAndNeverReadOutside() throws {
        let source = try Self.picture(width: 13, height: 11, format: .rgb24, padding: 5)
        let maps = [
            AffineMap(a: 1, b: 0, c: 0, d: 1, tx: 1e6, ty: -1e6), AffineMap(a: 1e-9, b: 0, c: 0, d: 1e-9, tx: 0, ty: 0),
            AffineMap(a: 0.3, b: -2.1, c: 1.7, d: 0.2, tx: -5.5, ty: 3.25), AffineMap(a: 50, b: 0, c: 0, d: 50, tx: -300, ty: -250),
        ]
        for map in maps {
            for size in [Size(width: 1, height: 1), Size(width: 37, height: 23)] {
                let out = source.warpedAffine(map, to: size, fill: 200)
                #expect(out.data.count == size.width * size.height * 3)
            }
        }
        #expect(source.warpedAffine(maps[0], to: Size(width: 4, height: 4), fill: 200).data.allSatisfy { $0 == 200 })
        // Shrunk a billion times: pixel (0, 0) samples the source's first pixel, every other one lands beyond 1e9.
        let tiny = source.warpedAffine(maps[1], to: Size(width: 4, height: 4), fill: 200)
        #expect(Array(tiny.data.prefix(3)) == Array(source.data.prefix(3)) && tiny.data.dropFirst(3).allSatisfy { $0 == 200 })
    }

    /// Rotations, scales and shifts that reach past every edge, onto odd output sizes.
    static let sweepMaps: [AffineMap] = [0.0, 0.4, 1.3, 2.9, -0.7].flatMap { angle in
        [0.37, 1.0, 1.13, 2.6, -1.2].map { scale in
            AffineMap(a: scale * cos(angle), b: -scale * sin(angle), c: scale * sin(angle), d: scale * cos(angle),
                      tx: 3.3 - 2 * scale, ty: -1.7 + scale)
        }
    }

    @Test(.enabled(if: Image.warpHasKernel, "this CPU has no AVX2 and FMA: only the portable warp runs"),
          arguments: [(1, 1), (2, 2), (9, 4), (31, 17), (64, 40)])
    func theAVX2KernelAndThePortableWarpAgreeOnOddSizesAndPaddedRows(width: Int, height: Int) throws {
        var compared = 0, different = 0
        for format in [PixelFormat.rgb24, .gray8] {
            for padding in [0, 1, 13] {
                let source = try Self.picture(width: width, height: height, format: format, padding: padding)
                for map in Self.sweepMaps {
                    for size in [Size(width: 1, height: 1), Size(width: 7, height: 3), Size(width: 8, height: 8), Size(width: 37, height: 29),
                                 Size(width: 70, height: 9)] {
                        let kernel = source.warpedAffine(map, to: size, fill: 77, path: .fastest)
                        let portable = source.warpedAffine(map, to: size, fill: 77, path: .portable)
                        // Rows of axis-aligned maps (AVX-512 VBMI) give the gathering path's bytes.
                        #expect(kernel.data == source.warpedAffine(map, to: size, fill: 77, path: .gathering).data)
                        let gaps = zip(kernel.data, portable.data).map { abs(Int($0) - Int($1)) }
                        #expect(gaps.max()! <= 1, "\(width)x\(height) \(format) padding \(padding) \(map) to \(size)")
                        compared += gaps.count
                        different += gaps.filter { $0 != 0 }.count
                    }
                }
            }
        }
        // The portable path's double-emulated fused multiply-add rounds twice; a true one once.
        #expect(different * 1000 <= compared, "\(different) of \(compared) samples differ")
    }
}
