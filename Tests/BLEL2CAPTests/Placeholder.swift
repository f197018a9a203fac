import Testing

@Test func BLEL2CAPTestsBuilds() {}
