import BLECore
import NIOCore

/// Splits B-frames into ACL data packets no longer than the controller accepts.
///
/// The first packet carries the start of the frame (header included) with the first-fragment flag, the others
/// `.continuing`. The fragments are slices of the encoded frame: no copy per fragment.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 7.2.1 (Fragmentation of L2CAP PDUs); Vol 4, Part E, 7.8.2
///   (LE_ACL_Data_Packet_Length of HCI_LE_Read_Buffer_Size).
public struct L2CAPFragmenter: Hashable, Sendable {
    /// The controller's LE ACL data packet length: the most octets one ACL packet may carry.
    public let maximumFragmentLength: Int

    /// - Parameter maximumFragmentLength: the controller's `LE_ACL_Data_Packet_Length` (27 at least on a
    ///   conforming controller; 251 is common).
    /// - Precondition: `maximumFragmentLength > 0`.
    public init(maximumFragmentLength: Int) {
        precondition(maximumFragmentLength > 0, "an ACL data packet carries at least one octet")
        self.maximumFragmentLength = maximumFragmentLength
    }

    /// The fragments of `frame`, in sending order.
    ///
    /// - Parameters:
    ///   - frame: the L2CAP frame to send.
    ///   - firstBoundary: the flag of the first fragment; a host sends `.firstNonFlushable` on LE.
    public func fragments(
        of frame: L2CAPBasicFrame, firstBoundary: L2CAPPacketBoundary = .firstNonFlushable
    ) -> [L2CAPFragment] {
        fragments(ofEncodedFrame: frame.encoded, firstBoundary: firstBoundary)
    }

    /// The fragments of an already encoded frame (or any PDU), in sending order. An empty input gives one
    /// empty first fragment.
    public func fragments(
        ofEncodedFrame encoded: ByteBuffer, firstBoundary: L2CAPPacketBoundary = .firstNonFlushable
    ) -> [L2CAPFragment] {
        var remaining = encoded
        var out: [L2CAPFragment] = []
        out.reserveCapacity(max(1, (encoded.readableBytes + maximumFragmentLength - 1) / maximumFragmentLength))
        var boundary = firstBoundary == .continuing ? .firstNonFlushable : firstBoundary
        repeat {
            let length = min(maximumFragmentLength, remaining.readableBytes)
            let slice = remaining.readSlice(length: length)!  // length <= readableBytes
            out.append(L2CAPFragment(boundary: boundary, data: slice))
            boundary = .continuing
        } while remaining.readableBytes > 0
        return out
    }
}
