// BLETransportPosix: TCP, UART and Linux HCI socket transports (see ARCHITECTURE.md, Transports).
