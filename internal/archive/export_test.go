package archive

// SetAzureRetries sets how many times the Azure client retries a request
// (-1: never) and returns what restores the default.
func SetAzureRetries(n int32) (restore func()) {
	saved := azureRetry
	azureRetry.MaxRetries = n
	return func() { azureRetry = saved }
}
