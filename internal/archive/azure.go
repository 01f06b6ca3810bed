package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
)

// openAzure opens an azblob:// store as gocloud.dev's azureblob URL
// opener does — the service URL from the AZURE_STORAGE_* variables and
// the URL's parameters (domain, protocol, storage_account, localemu,
// cdn), the credentials from the variables (azureClient) — with two
// differences: the variables are read at each open, not once a process,
// and the client's HTTP transport quotes no request's query in an error
// (noQueryTransport). With a SAS token (AZURE_STORAGE_SAS_TOKEN), which
// every request carries, the URL may not name the service: the token
// would go wherever it pointed.
func openAzure(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	svc := azureblob.NewDefaultServiceURLOptions()
	if q := u.Query(); svc.SASToken != "" && len(q) > 0 {
		return nil, fmt.Errorf("azblob: with AZURE_STORAGE_SAS_TOKEN set the service is named by the AZURE_STORAGE_* variables, not by the URL's parameters (%s)",
			strings.Join(slices.Sorted(maps.Keys(q)), ", "))
	}
	o := &azureblob.URLOpener{MakeClient: azureClient, ServiceURLOptions: *svc}
	return o.OpenBucketURL(ctx, u)
}

// azureClient makes the container client of an azblob:// store with the
// credentials azureblob documents, chosen in its order: an account and
// its key (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY); a SAS token
// (AZURE_STORAGE_SAS_TOKEN, already in svcURL); a connection string
// (AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGEBLOB_CONNECTIONSTRING);
// else azidentity's DefaultAzureCredential (a managed identity, a
// workload identity, AZURE_CLIENT_ID and the like).
// azureRetry is the Azure client's retry policy: the SDK's defaults
// (three retries, from 4s apart). Tests shorten it.
var azureRetry policy.RetryOptions

func azureClient(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: noQueryTransport{c: &http.Client{Transport: http.DefaultTransport}},
		Telemetry: policy.TelemetryOptions{ApplicationID: "toolwire-archive"},
		Retry:     azureRetry,
	}}
	containerURL, err := url.JoinPath(string(svcURL), string(name))
	if err != nil {
		return nil, err
	}
	account, key := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY")
	conn := cmp.Or(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"), os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING"))
	switch {
	case account != "" && key != "":
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, errors.New("azblob: AZURE_STORAGE_KEY is not a storage account key (base64)")
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
		return container.NewClientWithNoCredential(containerURL, opts)
	case conn != "":
		c, err := container.NewClientFromConnectionString(conn, string(name), opts)
		if err != nil {
			return nil, errors.New("azblob: the connection string is malformed")
		}
		return c, nil
	default:
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("azblob: no credentials: %w", err)
		}
		return container.NewClient(containerURL, cred, opts)
	}
}

// noQueryTransport sends Azure's requests and strips the query (and user
// info) from the URL a transport error quotes: net/http quotes the whole
// URL, and with a SAS token the query is the credential.
type noQueryTransport struct{ c *http.Client }

func (t noQueryTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.c.Do(req)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		ue.URL = redactURL(ue.URL)
	}
	return resp, err
}
