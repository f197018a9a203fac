/// One side's part in link encryption: where it stands in the encryption start or pause procedure, and the
/// session each direction uses once encrypted.
///
/// The central's host starts the procedure (LE Enable Encryption); on an encrypted link the central first pauses
/// encryption (LL_PAUSE_ENC_REQ/RSP) and then runs the start procedure again with the new key. While a procedure
/// runs, a side sends no data and no other LL control PDU, except LL_TERMINATE_IND.
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 5.1.3.1 (encryption start), 5.1.3.2 (encryption pause).
struct LinkEncryption {
    enum Step: Equatable {
        case idle
        // Central.
        /// LL_PAUSE_ENC_REQ sent on an encrypted link; waiting for LL_PAUSE_ENC_RSP. The new key's request follows.
        case pausing(longTermKey: [UInt8], rand: UInt64, ediv: UInt16)
        /// LL_ENC_REQ sent with SKDc and IVc; waiting for LL_ENC_RSP.
        case requested(longTermKey: [UInt8], skd: UInt64, iv: UInt32)
        /// LL_ENC_RSP received; waiting for LL_START_ENC_REQ (the peripheral asks its host for the key meanwhile).
        case awaitingStart(LLSession)
        /// LL_START_ENC_RSP sent encrypted; waiting for the peripheral's.
        case awaitingStartResponse
        // Peripheral.
        /// LL_PAUSE_ENC_REQ received and answered; waiting for the central's LL_PAUSE_ENC_RSP, then LL_ENC_REQ.
        case paused
        /// LL_ENC_REQ received and LL_ENC_RSP queued; the host was asked for the key (LE Long Term Key Request).
        case awaitingKey(skdCentral: UInt64, ivCentral: UInt32, skdPeripheral: UInt64, ivPeripheral: UInt32)
        /// LL_START_ENC_REQ sent, receiving encrypted; waiting for the central's LL_START_ENC_RSP, after which this
        /// side transmits encrypted too.
        case started(LLSession)
    }

    var step = Step.idle
    /// The link was encrypted when this procedure began: success is an Encryption Key Refresh Complete.
    var refreshing = false
    /// Whether the host has been told the link is encrypted (Encryption Change with Encryption_Enabled 0x01).
    var enabled = false
    /// The session this side encrypts with, and how many encrypted PDUs it has sent under it.
    var transmit: LLSession?
    var transmitCounter: UInt64 = 0
    /// The session this side decrypts with, and how many encrypted PDUs it has received under it.
    var receive: LLSession?
    var receiveCounter: UInt64 = 0

    /// The host was asked for the long term key and has not answered yet.
    var awaitsKey: Bool {
        if case .awaitingKey = step { true } else { false }
    }

    /// A procedure is running: data waits, and so do LL control PDUs that are not part of it.
    var holdsTraffic: Bool { step != .idle }

    /// Starts encrypting what this side sends, counting from zero.
    mutating func startTransmitting(_ session: LLSession) {
        transmit = session
        transmitCounter = 0
    }

    /// Starts decrypting what this side receives, counting from zero.
    mutating func startReceiving(_ session: LLSession) {
        receive = session
        receiveCounter = 0
    }
}
