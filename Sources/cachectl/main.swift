import CacheCLI
await CachectlMain.run()
