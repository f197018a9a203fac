extension ATTErrorCode {
    /// `CBATTError.Code.invalidPdu`'s spelling of Invalid PDU (0x04).
    public static var invalidPdu: ATTErrorCode { .invalidPDU }
    /// `CBATTError.Code.insufficientEncryptionKeySize`'s spelling of 0x0C.
    public static var insufficientEncryptionKeySize: ATTErrorCode { .encryptionKeySizeTooShort }
}
