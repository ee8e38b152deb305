// integration tests come next
