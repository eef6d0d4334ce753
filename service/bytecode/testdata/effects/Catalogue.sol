// SPDX-License-Identifier: MIT
pragma solidity >=0.5.0 <0.9.0;

// The renamed-power catalogue: tokens written the way scam tokens are,
// each power under a name no selector table knows, and each with a
// control of the same shape whose power is gone (a renounced or zero
// guard: the same code; a constant or an immutable: its own contract).
// compile.js builds it with solc 0.5, 0.6, 0.7 and 0.8 (optimizer on and
// off, and via-IR on 0.8); CTOR, VIRTUAL and OVERRIDE are filled in per
// version (and SENDER, payable(msg.sender) from 0.8, and MAXUINT). Immutable.sol holds
// what needs solc 0.6 or later. For tests only.

contract Base {
    mapping(address => uint256) internal _balances;
    mapping(address => mapping(address => uint256)) internal _allowances;
    uint256 internal _totalSupply;
    address internal _owner;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor() CTOR {
        _owner = msg.sender;
        _totalSupply = 1e27;
        _balances[msg.sender] = 1e27;
    }

    modifier onlyOwner() {
        require(msg.sender == _owner, "not owner");
        _;
    }

    function owner() public view returns (address) {
        return _owner;
    }

    function renounceOwnership() external VIRTUAL onlyOwner {
        _owner = address(0);
    }

    function totalSupply() external view returns (uint256) {
        return _totalSupply;
    }

    function balanceOf(address a) public view returns (uint256) {
        return _balances[a];
    }

    function allowance(address a, address s) external view returns (uint256) {
        return _allowances[a][s];
    }

    function approve(address s, uint256 v) external returns (bool) {
        _allowances[msg.sender][s] = v;
        emit Approval(msg.sender, s, v);
        return true;
    }

    function transfer(address to, uint256 v) external returns (bool) {
        _transfer(msg.sender, to, v);
        return true;
    }

    function transferFrom(address from, address to, uint256 v) external returns (bool) {
        require(_allowances[from][msg.sender] >= v, "allowance");
        _allowances[from][msg.sender] -= v;
        _transfer(from, to, v);
        return true;
    }

    function _transfer(address from, address to, uint256 v) internal {
        _check(from, to, v);
        require(_balances[from] >= v, "balance");
        _balances[from] -= v;
        uint256 credit = _credit(from, v);
        _balances[to] += credit;
        emit Transfer(from, to, credit);
    }

    function _check(address from, address to, uint256 v) internal VIRTUAL {}

    function _credit(address, uint256 v) internal VIRTUAL returns (uint256) {
        return v;
    }
}

/// A mint behind a second, private owner: owner() may read zero.
contract HiddenFarm is Base {
    address private _dev;

    constructor(address dev) CTOR {
        _dev = dev;
        _owner = address(0);
    }

    function farm(address to, uint256 v) external {
        require(msg.sender == _dev, "no");
        _balances[to] += v;
        _totalSupply += v;
    }
}

/// Takes anyone's tokens.
contract Rescue is Base {
    function rescue(address from, uint256 v) external onlyOwner {
        _balances[from] -= v;
        _balances[msg.sender] += v;
    }
}

/// A blacklist under another name and type.
contract Girls is Base {
    mapping(address => uint8) private _girls;

    function setGirl(address a, uint8 v) external onlyOwner {
        _girls[a] = v;
    }

    function _check(address from, address to, uint256) internal OVERRIDE {
        require(_girls[from] != 1 && _girls[to] != 1, "girl");
    }
}

/// A bot list written by an internal function from a batch setter.
contract Bots is Base {
    mapping(address => bool) private _bots;

    function manage(address[] calldata list, bool on) external onlyOwner {
        for (uint256 i = 0; i < list.length; i++) {
            _setBot(list[i], on);
        }
    }

    function _setBot(address a, bool on) private {
        _bots[a] = on;
    }

    function _check(address from, address, uint256) internal OVERRIDE {
        require(!_bots[from], "bot");
    }
}

/// Only listed senders may move tokens.
contract Guests is Base {
    mapping(address => bool) private _guests;

    function invite(address a, bool on) external onlyOwner {
        _guests[a] = on;
    }

    function _check(address from, address, uint256) internal OVERRIDE {
        require(_guests[from] || from == _owner, "not invited");
    }
}

/// A trading switch.
contract Launch is Base {
    bool private _live;

    function openTrading(bool on) external onlyOwner {
        _live = on;
    }

    function _check(address from, address to, uint256) internal OVERRIDE {
        require(_live || from == _owner || to == _owner, "closed");
    }
}

/// Control of Launch: a switch that only opens.
contract OneWayLaunch is Base {
    bool private _live;

    function enableTrading() external onlyOwner {
        _live = true;
    }

    function _check(address from, address to, uint256) internal OVERRIDE {
        require(_live || from == _owner || to == _owner, "closed");
    }
}

/// Pausable by its usual names, with constant writes.
contract Pauser is Base {
    bool private _paused;

    function pause() external onlyOwner {
        _paused = true;
    }

    function unpause() external onlyOwner {
        _paused = false;
    }

    function _check(address, address, uint256) internal OVERRIDE {
        require(!_paused, "paused");
    }
}

/// A pause under another name.
contract Halt is Base {
    bool private _stopped;

    function hold(bool on) external onlyOwner {
        _stopped = on;
    }

    function _check(address, address, uint256) internal OVERRIDE {
        require(!_stopped, "held");
    }
}

/// A maximum amount the owner may set to zero.
contract MaxTx is Base {
    uint256 private _max = 1e30;

    function tune(uint256 m) external onlyOwner {
        _max = m;
    }

    function _check(address from, address, uint256 v) internal OVERRIDE {
        require(v <= _max || from == _owner, "too much");
    }
}

/// Control of MaxTx: limits the owner can only lift.
contract LiftOnly is Base {
    uint256 private _max = 1e25;

    function removeLimits() external onlyOwner {
        _max = MAXUINT;
    }

    function _check(address from, address, uint256 v) internal OVERRIDE {
        require(v <= _max || from == _owner, "too much");
    }
}

/// A maximum wallet the owner may set to zero.
contract MaxWallet is Base {
    uint256 private _cap = 1e30;

    function resize(uint256 m) external onlyOwner {
        _cap = m;
    }

    function _check(address, address to, uint256 v) internal OVERRIDE {
        require(balanceOf(to) + v <= _cap || to == _owner, "too big");
    }
}

/// A cooldown the owner may set to forever.
contract Cooldown is Base {
    mapping(address => uint256) private _last;
    uint256 private _wait;

    function pace(uint256 w) external onlyOwner {
        _wait = w;
    }

    function _check(address from, address to, uint256) internal OVERRIDE {
        require(_last[from] + _wait <= block.timestamp, "wait");
        _last[to] = block.timestamp;
    }
}

/// An uncapped tax.
contract Tax is Base {
    uint256 private _buy;
    uint256 private _sell;

    function setFeeRate(uint256 b, uint256 s) external onlyOwner {
        _buy = b;
        _sell = s;
    }

    function _credit(address, uint256 v) internal OVERRIDE returns (uint256) {
        uint256 fee = v * (_buy + _sell) / 100;
        _balances[address(this)] += fee;
        return v - fee;
    }
}

/// A tax with a ceiling of 10 %.
contract CappedTax is Base {
    uint256 private _rate;

    function setRate(uint256 r) external onlyOwner {
        require(r <= 10, "cap");
        _rate = r;
    }

    function _credit(address, uint256 v) internal OVERRIDE returns (uint256) {
        uint256 fee = v * _rate / 100;
        _balances[address(this)] += fee;
        return v - fee;
    }
}

/// Control of Tax: the rate is a constant.
contract FixedTax is Base {
    uint256 private constant RATE = 3;

    function _credit(address, uint256 v) internal OVERRIDE returns (uint256) {
        uint256 fee = v * RATE / 100;
        _balances[address(this)] += fee;
        return v - fee;
    }
}

/// renounceOwnership clears owner() but a second guard stays.
contract FakeRenounce is Base {
    address private _shadow;

    constructor(address shadow) CTOR {
        _shadow = shadow;
    }

    modifier onlyTeam() {
        require(msg.sender == _owner || msg.sender == _shadow, "team");
        _;
    }

    function setFeeRate(uint256 r) external onlyTeam {
        _rate = r;
    }

    uint256 private _rate;

    function _credit(address, uint256 v) internal OVERRIDE returns (uint256) {
        uint256 fee = v * _rate / 100;
        _balances[_shadow] += fee;
        return v - fee;
    }
}

interface IGuard {
    function check(address from, address to, uint256 v) external;
}

/// An external antibot hook the owner may point anywhere.
contract Hooked is Base {
    address private _guard;

    function setGuard(address g) external onlyOwner {
        _guard = g;
    }

    function _check(address from, address to, uint256 v) internal OVERRIDE {
        if (_guard != address(0)) IGuard(_guard).check(from, to, v);
    }
}

/// Code the owner can swap: a helper run by DELEGATECALL from an address
/// in storage.
contract Swappable is Base {
    address private _logic;

    function setLogic(address l) external onlyOwner {
        _logic = l;
    }

    function run(bytes calldata data) external {
        (bool ok, ) = _logic.delegatecall(data);
        require(ok, "run");
    }
}

/// The owner can destroy the token.
contract Cleanup is Base {
    function cleanup() external onlyOwner {
        selfdestruct(SENDER);
    }
}

/// A mint for whoever started the transaction.
contract OriginFarm is Base {
    address private _dev;

    constructor(address dev) CTOR {
        _dev = dev;
    }

    function harvest(uint256 v) external {
        require(tx.origin == _dev, "no");
        _balances[tx.origin] += v;
        _totalSupply += v;
    }
}

/// A mint for the members of an operator list.
contract Operators is Base {
    mapping(address => bool) private _ops;

    constructor(address op) CTOR {
        _ops[op] = true;
    }

    function farm(address to, uint256 v) external {
        require(_ops[msg.sender], "no");
        _balances[to] += v;
        _totalSupply += v;
    }
}

/// Control of the mints: a farm no one can call (its guard a constant
/// dead address).
contract DeadFarm is Base {
    function farm(address to, uint256 v) external {
        require(msg.sender == 0x000000000000000000000000000000000000dEaD, "no");
        _balances[to] += v;
        _totalSupply += v;
    }
}

/// A mint reached only through the fallback, by a private operator: no
/// selector names it.
contract FallbackFarm is Base {
    address private _op;

    constructor(address op) CTOR {
        _op = op;
    }

    FALLBACK {
        require(msg.sender == _op, "no");
        _balances[_op] += msg.data.length * 1e18;
        _totalSupply += msg.data.length * 1e18;
    }
}

/// An address the owner sets that transferFrom lets skip the allowance:
/// it can move anyone's tokens.
contract Spender is Base {
    address private _spender;

    function setSpender(address s) external onlyOwner {
        _spender = s;
    }

    function pull(address from, address to, uint256 v) external returns (bool) {
        if (msg.sender != _spender) {
            require(_allowances[from][msg.sender] >= v, "allowance");
            _allowances[from][msg.sender] -= v;
        }
        _transfer(from, to, v);
        return true;
    }
}

/// A switch that blocks every sender not on the team when closed; open
/// now, and the owner can close it.
contract TeamSwitch is Base {
    bool private _open = true;
    mapping(address => bool) private _team;

    function setOpen(bool on) external onlyOwner {
        _open = on;
    }

    function _check(address from, address, uint256) internal OVERRIDE {
        require(_open || _team[from], "closed");
    }
}
