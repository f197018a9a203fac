import Testing

@Test func BLEVirtualControllerTestsBuilds() {}
