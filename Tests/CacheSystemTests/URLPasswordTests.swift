import Testing
import CacheSystem

/// `hidingURLPassword`: a manifest URL with credentials is shown without
/// its password (the newcomer's `get images` printed it).
@Suite struct URLPasswordTests {
    @Test(arguments: [
        ("http://user:pw@host.test/a.png", "http://user:***@host.test/a.png"),
        ("https://u:p:q@h.test:8443/x?y=1#z", "https://u:***@h.test:8443/x?y=1#z"),
        ("https://u:@h.test/", "https://u:***@h.test/"),
        ("http://user@host.test/a.png", "http://user@host.test/a.png"),
        ("http://host.test/a@b:c.png", "http://host.test/a@b:c.png"),
        ("http://host.test/?q=a:b@c", "http://host.test/?q=a:b@c"),
        ("a.png", "a.png"),
        ("", ""),
        ("mailto:a:b@c", "mailto:a:b@c"),
    ])
    func passwordsAreHiddenAndNothingElseChanges(_ url: String, _ shown: String) {
        #expect(url.hidingURLPassword == shown)
    }
}
