import DequeModule

/// Link encryption: the encryption start and pause procedures between the two link layers, the HCI events that
/// tell the hosts, and what each side reads of an encrypted PDU.
///
/// Start (Vol 6, Part B, 5.1.3.1): the central sends LL_ENC_REQ (Rand, EDIV, SKDc, IVc); the peripheral answers
/// LL_ENC_RSP (SKDp, IVp) and asks its host for the key (LE Long Term Key Request). With a key, both derive
/// SK = e(LTK, SKDp || SKDc) and IV = IVp || IVc; the peripheral sends LL_START_ENC_REQ in the clear and decrypts
/// from then on; the central answers LL_START_ENC_RSP encrypted; the peripheral answers with its own, encrypted.
/// Without a key the peripheral rejects LL_ENC_REQ with PIN or Key Missing and the link stays up, unencrypted.
///
/// Pause (5.1.3.2): on an encrypted link the central sends LL_PAUSE_ENC_REQ; the peripheral answers
/// LL_PAUSE_ENC_RSP (both encrypted) and stops decrypting; the central answers LL_PAUSE_ENC_RSP in the clear and
/// the start procedure follows with the new key. The hosts then hear Encryption Key Refresh Complete.
///
/// Each side derives its session key from the key its own host gave. Keys that differ give different session
/// keys, and the first encrypted PDU fails its MIC at the receiver, which leaves the link at once with Connection
/// Terminated due to MIC Failure (0x3D), as a real link layer does; its peer, which hears nothing more, reaches
/// its supervision timeout.
extension World {
    // MARK: Commands

    /// LE Enable Encryption (Vol 4, Part E, 7.8.24) on the central `link`, whose host has answered Command Status:
    /// starts encryption, or refreshes the key of an encrypted link.
    func startEncryption(_ link: Link, rand: UInt64, ediv: UInt16, longTermKey: [UInt8]) {
        if link.sides[0].encryption.enabled {
            link.sides[0].encryption.refreshing = true
            link.sides[0].encryption.step = .pausing(longTermKey: longTermKey, rand: rand, ediv: ediv)
            link.sides[0].encryptionControl.append(.pauseEncReq)
        } else {
            link.sides[0].encryption.refreshing = false
            requestEncryption(link, rand: rand, ediv: ediv, longTermKey: longTermKey)
        }
        wake(link)
    }

    /// Queues LL_ENC_REQ with a fresh SKDc and IVc from the radio's generator.
    func requestEncryption(_ link: Link, rand: UInt64, ediv: UInt16, longTermKey: [UInt8]) {
        let skd = random.next()
        let iv = UInt32(truncatingIfNeeded: random.next())
        link.sides[0].encryption.step = .requested(longTermKey: longTermKey, skd: skd, iv: iv)
        link.sides[0].encryptionControl.append(.encReq(rand: rand, ediv: ediv, skd: skd, iv: iv))
    }

    /// LE Long Term Key Request Reply (Vol 4, Part E, 7.8.25) on the peripheral `link`, whose host was asked for
    /// the key: derive the session, decrypt from now on, and send LL_START_ENC_REQ in the clear.
    func longTermKeyReply(_ link: Link, longTermKey: [UInt8]) {
        guard case .awaitingKey(let skdC, let ivC, let skdP, let ivP) = link.sides[1].encryption.step else { return }
        let session = LLSession(
            longTermKey: longTermKey, skdCentral: skdC, skdPeripheral: skdP, ivCentral: ivC, ivPeripheral: ivP)
        link.sides[1].encryption.startReceiving(session)
        link.sides[1].encryption.step = .started(session)
        link.sides[1].encryptionControl.append(.startEncReq)
        wake(link)
    }

    /// The peripheral has no key (LE Long Term Key Request Negative Reply, Vol 4, Part E, 7.8.26, or a host that
    /// masked the request): LL_REJECT_EXT_IND naming LL_ENC_REQ when the central's features (from a feature
    /// exchange) include Extended Reject Indication, else LL_REJECT_IND; error PIN or Key Missing (Vol 6, Part B,
    /// 5.1.3.1). The procedure is over on this side and the link is not encrypted (a refresh already paused it).
    func rejectEncryption(_ link: Link) {
        let extendedReject = (link.sides[1].peerFeatures ?? 0) & LLFeature.extendedRejectIndication != 0
        link.sides[1].encryptionControl.append(
            extendedReject
                ? .rejectExtInd(rejectOpcode: LLControlPDU.encReqOpcode, error: Status.pinOrKeyMissing)
                : .rejectInd(error: Status.pinOrKeyMissing))
        link.sides[1].encryption.step = .idle
        link.sides[1].encryption.refreshing = false
        link.sides[1].encryption.enabled = false
    }

    // MARK: LL control PDUs

    /// Side `r` received a PDU of the encryption procedures.
    func receivedEncryptionPDU(_ pdu: LLControlPDU, link: Link, by r: Int) {
        let receiver = controllers[link.sides[r].controller]
        let handle = link.sides[r].handle
        switch (pdu, link.sides[r].encryption.step) {
        case (.pauseEncReq, .idle) where r == 1 && link.sides[1].encryption.enabled:
            // Answered under the old key; nothing from the central is decrypted after this.
            link.sides[1].encryption.step = .paused
            link.sides[1].encryption.refreshing = true
            link.sides[1].encryption.receive = nil
            link.sides[1].encryptionControl.append(.pauseEncRsp)

        case (.pauseEncRsp, .pausing(let key, let rand, let ediv)) where r == 0:
            // The central's own LL_PAUSE_ENC_RSP and what follows go in the clear.
            link.sides[0].encryption.transmit = nil
            link.sides[0].encryption.receive = nil
            link.sides[0].encryptionControl.append(.pauseEncRsp)
            requestEncryption(link, rand: rand, ediv: ediv, longTermKey: key)

        case (.pauseEncRsp, .paused) where r == 1:
            link.sides[1].encryption.transmit = nil

        case (.encReq(let rand, let ediv, let skdC, let ivC), .idle) where r == 1,
            (.encReq(let rand, let ediv, let skdC, let ivC), .paused) where r == 1:
            let skdP = random.next()
            let ivP = UInt32(truncatingIfNeeded: random.next())
            link.sides[1].encryption.step = .awaitingKey(
                skdCentral: skdC, ivCentral: ivC, skdPeripheral: skdP, ivPeripheral: ivP)
            link.sides[1].encryptionControl.append(.encRsp(skd: skdP, iv: ivP))
            if leEventEnabled(receiver, subevent: 0x05) {
                // LE Long Term Key Request (Vol 4, Part E, 7.7.65.5).
                var w = ByteWriter(capacity: 12)
                w.u16(handle)
                w.u64(rand)
                w.u16(ediv)
                emitLEEvent(receiver, subevent: 0x05, w.bytes)
            } else {
                // A host that masked the request cannot give a key: as if it had answered that it has none.
                rejectEncryption(link)
            }

        case (.encRsp(let skdP, let ivP), .requested(let key, let skdC, let ivC)) where r == 0:
            link.sides[0].encryption.step = .awaitingStart(
                LLSession(
                    longTermKey: key, skdCentral: skdC, skdPeripheral: skdP, ivCentral: ivC, ivPeripheral: ivP))

        case (.startEncReq, .awaitingStart(let session)) where r == 0:
            link.sides[0].encryption.startTransmitting(session)
            link.sides[0].encryption.startReceiving(session)
            link.sides[0].encryption.step = .awaitingStartResponse
            link.sides[0].encryptionControl.append(.startEncRsp)

        case (.startEncRsp, .started(let session)) where r == 1:
            // The central's answer opened under our key: the peripheral's own answer goes first, encrypted.
            link.sides[1].encryption.startTransmitting(session)
            link.sides[1].encryptionControl.prepend(.startEncRsp)
            encryptionStarted(link, side: 1)

        case (.startEncRsp, .awaitingStartResponse) where r == 0:
            encryptionStarted(link, side: 0)

        case (.rejectInd(let error), .requested), (.rejectInd(let error), .awaitingStart),
            (.rejectExtInd(_, let error), .requested), (.rejectExtInd(_, let error), .awaitingStart):
            guard r == 0 else { return }
            link.sides[0].encryption.step = .idle
            link.sides[0].encryption.refreshing = false
            link.sides[0].encryption.enabled = false
            emitEncryptionChange(receiver, status: error, handle: handle, enabled: false)

        default:
            // Out of turn: a peer that is not this model. Ignored rather than trapped on.
            break
        }
    }

    /// The start procedure is over on side `s`: its host hears Encryption Change (or, after a pause, Encryption Key
    /// Refresh Complete), and its held traffic flows again.
    func encryptionStarted(_ link: Link, side s: Int) {
        let controller = controllers[link.sides[s].controller]
        let handle = link.sides[s].handle
        if link.sides[s].encryption.refreshing {
            // Encryption Key Refresh Complete (Vol 4, Part E, 7.7.39).
            var w = ByteWriter(capacity: 3)
            w.u8(Status.success)
            w.u16(handle)
            emitEvent(controller, code: 0x30, w.bytes)
        } else {
            emitEncryptionChange(controller, status: Status.success, handle: handle, enabled: true)
        }
        link.sides[s].encryption.step = .idle
        link.sides[s].encryption.refreshing = false
        link.sides[s].encryption.enabled = true
    }

    /// Encryption Change [v1] (Vol 4, Part E, 7.7.8): Encryption_Enabled 0x01 is AES-CCM on an LE link.
    func emitEncryptionChange(_ controller: ControllerState, status: UInt8, handle: UInt16, enabled: Bool) {
        var w = ByteWriter(capacity: 4)
        w.u8(status)
        w.u16(handle)
        w.u8(enabled ? 0x01 : 0x00)
        emitEvent(controller, code: 0x08, w.bytes)
    }

    // MARK: Encrypted PDUs

    /// What side `r` reads of the non-empty PDU its peer has in flight: the plaintext of an encrypted one opened
    /// with `r`'s own session and packet counter, the bytes of a clear one, or nil when the MIC check fails (the
    /// keys differ, or a clear PDU reached a side that expects encryption).
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part E, 1 and 2.
    func read(_ link: Link, by r: Int) -> [UInt8]? {
        let sender = link.sides[1 - r]
        guard let (header, plaintext) = sender.currentPlaintext(fromCentral: r == 1) else { return [] }
        guard let session = link.sides[r].encryption.receive else { return plaintext }
        guard let sealed = sender.sealed,
            let opened = session.open(
                sealed, header: header, counter: link.sides[r].encryption.receiveCounter, fromCentral: r == 1)
        else { return nil }
        link.sides[r].encryption.receiveCounter += 1
        return opened
    }

    /// Side `r` received a PDU whose MIC does not check: it leaves the link at once, without LL_TERMINATE_IND, and
    /// its host hears Connection Terminated due to MIC Failure (Vol 6, Part E, 1; Vol 1, Part F, 2.61).
    func micFailure(_ link: Link, side r: Int) {
        emitDisconnectionComplete(
            controllers[link.sides[r].controller], handle: link.sides[r].handle, reason: Status.micFailure)
        leave(link, side: r)
    }
}

/// LE feature bits the link layer acts on (Vol 6, Part B, 4.6).
enum LLFeature {
    static let extendedRejectIndication: UInt64 = 1 << 2
}
