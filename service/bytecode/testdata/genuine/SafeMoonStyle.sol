// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

// SafeMoonStyle is the shape of SafeMoon's widely copied token, written
// for these tests: reflections (_rOwned, _tOwned for the accounts excluded
// from reward), a tax and a liquidity fee the owner sets, fee exclusions,
// a maximum transaction, and the swap-and-liquify step that sells the
// collected fee into the token's own pair from inside _transfer, except
// when the sender is that pair (an immutable created in the constructor),
// under a lockTheSwap flag; fees removed and restored around an untaxed
// transfer. The precision tests check that none of this reads as a hidden
// owner or a mint.

interface IFactory {
    function createPair(address a, address b) external returns (address);
}

interface IRouter {
    function factory() external view returns (address);
    function WETH() external view returns (address);
    function swapExactTokensForETHSupportingFeeOnTransferTokens(uint256, uint256, address[] calldata, address, uint256) external;
    function addLiquidityETH(address, uint256, uint256, uint256, address, uint256) external payable returns (uint256, uint256, uint256);
}

contract SafeMoonStyle {
    mapping(address => uint256) private _rOwned;
    mapping(address => uint256) private _tOwned;
    mapping(address => mapping(address => uint256)) private _allowances;
    mapping(address => bool) private _isExcludedFromFee;
    mapping(address => bool) private _isExcluded;
    address[] private _excluded;

    uint256 private constant MAX = ~uint256(0);
    uint256 private _tTotal = 1_000_000_000 * 1e18;
    uint256 private _rTotal = (MAX - (MAX % _tTotal));
    uint256 private _tFeeTotal;

    string public constant name = "SafeMoonStyle";
    string public constant symbol = "SMS";
    uint8 public constant decimals = 18;

    uint256 public _taxFee;
    uint256 private _previousTaxFee;
    uint256 public _liquidityFee;
    uint256 private _previousLiquidityFee;

    address private _owner;
    IRouter public immutable uniswapV2Router;
    address public immutable uniswapV2Pair;

    bool private inSwapAndLiquify;
    bool public swapAndLiquifyEnabled = true;
    uint256 public _maxTxAmount = 5_000_000 * 1e18;
    uint256 private numTokensSellToAddToLiquidity = 500_000 * 1e18;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    modifier lockTheSwap() {
        inSwapAndLiquify = true;
        _;
        inSwapAndLiquify = false;
    }

    modifier onlyOwner() {
        require(_owner == msg.sender, "Ownable: caller is not the owner");
        _;
    }

    constructor(address router, uint256 taxFee, uint256 liquidityFee) {
        _owner = msg.sender;
        _rOwned[msg.sender] = _rTotal;
        uniswapV2Router = IRouter(router);
        uniswapV2Pair = IFactory(IRouter(router).factory()).createPair(address(this), IRouter(router).WETH());
        _taxFee = _previousTaxFee = taxFee;
        _liquidityFee = _previousLiquidityFee = liquidityFee;
        _isExcludedFromFee[msg.sender] = true;
        _isExcludedFromFee[address(this)] = true;
        emit Transfer(address(0), msg.sender, _tTotal);
    }

    receive() external payable {}

    function owner() public view returns (address) {
        return _owner;
    }

    function renounceOwnership() external onlyOwner {
        _owner = address(0);
    }

    function totalSupply() external view returns (uint256) {
        return _tTotal;
    }

    function balanceOf(address account) public view returns (uint256) {
        if (_isExcluded[account]) return _tOwned[account];
        return tokenFromReflection(_rOwned[account]);
    }

    function allowance(address o, address s) external view returns (uint256) {
        return _allowances[o][s];
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        _approve(msg.sender, spender, amount);
        return true;
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        _transfer(msg.sender, to, amount);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        _transfer(from, to, amount);
        _approve(from, msg.sender, _allowances[from][msg.sender] - amount);
        return true;
    }

    function tokenFromReflection(uint256 rAmount) public view returns (uint256) {
        require(rAmount <= _rTotal, "Amount must be less than total reflections");
        return rAmount / _getRate();
    }

    function excludeFromReward(address account) external onlyOwner {
        require(!_isExcluded[account], "Account is already excluded");
        if (_rOwned[account] > 0) _tOwned[account] = tokenFromReflection(_rOwned[account]);
        _isExcluded[account] = true;
        _excluded.push(account);
    }

    function includeInReward(address account) external onlyOwner {
        require(_isExcluded[account], "Account is already included");
        for (uint256 i = 0; i < _excluded.length; i++) {
            if (_excluded[i] == account) {
                _excluded[i] = _excluded[_excluded.length - 1];
                _tOwned[account] = 0;
                _isExcluded[account] = false;
                _excluded.pop();
                break;
            }
        }
    }

    function excludeFromFee(address account) external onlyOwner {
        _isExcludedFromFee[account] = true;
    }

    function includeInFee(address account) external onlyOwner {
        _isExcludedFromFee[account] = false;
    }

    function setTaxFeePercent(uint256 taxFee) external onlyOwner {
        _taxFee = taxFee;
    }

    function setLiquidityFeePercent(uint256 liquidityFee) external onlyOwner {
        _liquidityFee = liquidityFee;
    }

    function setMaxTxPercent(uint256 maxTxPercent) external onlyOwner {
        _maxTxAmount = _tTotal * maxTxPercent / 100;
    }

    function setSwapAndLiquifyEnabled(bool on) external onlyOwner {
        swapAndLiquifyEnabled = on;
    }

    function _getRate() private view returns (uint256) {
        uint256 rSupply = _rTotal;
        uint256 tSupply = _tTotal;
        for (uint256 i = 0; i < _excluded.length; i++) {
            if (_rOwned[_excluded[i]] > rSupply || _tOwned[_excluded[i]] > tSupply) return _rTotal / _tTotal;
            rSupply -= _rOwned[_excluded[i]];
            tSupply -= _tOwned[_excluded[i]];
        }
        if (rSupply < _rTotal / _tTotal) return _rTotal / _tTotal;
        return rSupply / tSupply;
    }

    function removeAllFee() private {
        if (_taxFee == 0 && _liquidityFee == 0) return;
        _previousTaxFee = _taxFee;
        _previousLiquidityFee = _liquidityFee;
        _taxFee = 0;
        _liquidityFee = 0;
    }

    function restoreAllFee() private {
        _taxFee = _previousTaxFee;
        _liquidityFee = _previousLiquidityFee;
    }

    function _approve(address o, address spender, uint256 amount) private {
        require(o != address(0) && spender != address(0), "ERC20: approve from or to the zero address");
        _allowances[o][spender] = amount;
        emit Approval(o, spender, amount);
    }

    function _transfer(address from, address to, uint256 amount) private {
        require(from != address(0) && to != address(0), "ERC20: transfer from or to the zero address");
        require(amount > 0, "Transfer amount must be greater than zero");
        if (from != _owner && to != _owner) require(amount <= _maxTxAmount, "Transfer amount exceeds the maxTxAmount.");

        uint256 contractTokenBalance = balanceOf(address(this));
        if (contractTokenBalance >= _maxTxAmount) contractTokenBalance = _maxTxAmount;
        bool overMinTokenBalance = contractTokenBalance >= numTokensSellToAddToLiquidity;
        if (overMinTokenBalance && !inSwapAndLiquify && from != uniswapV2Pair && swapAndLiquifyEnabled) {
            swapAndLiquify(numTokensSellToAddToLiquidity);
        }
        bool takeFee = !(_isExcludedFromFee[from] || _isExcludedFromFee[to]);
        _tokenTransfer(from, to, amount, takeFee);
    }

    function swapAndLiquify(uint256 tokens) private lockTheSwap {
        uint256 half = tokens / 2;
        uint256 otherHalf = tokens - half;
        uint256 initialBalance = address(this).balance;
        address[] memory path = new address[](2);
        path[0] = address(this);
        path[1] = uniswapV2Router.WETH();
        _approve(address(this), address(uniswapV2Router), half);
        uniswapV2Router.swapExactTokensForETHSupportingFeeOnTransferTokens(half, 0, path, address(this), block.timestamp);
        uint256 newBalance = address(this).balance - initialBalance;
        _approve(address(this), address(uniswapV2Router), otherHalf);
        uniswapV2Router.addLiquidityETH{value: newBalance}(address(this), otherHalf, 0, 0, _owner, block.timestamp);
    }

    function _tokenTransfer(address from, address to, uint256 amount, bool takeFee) private {
        if (!takeFee) removeAllFee();
        uint256 rate = _getRate();
        uint256 tFee = amount * _taxFee / 100;
        uint256 tLiquidity = amount * _liquidityFee / 100;
        uint256 tTransferAmount = amount - tFee - tLiquidity;
        _rOwned[from] -= amount * rate;
        if (_isExcluded[from]) _tOwned[from] -= amount;
        _rOwned[to] += tTransferAmount * rate;
        if (_isExcluded[to]) _tOwned[to] += tTransferAmount;
        _rOwned[address(this)] += tLiquidity * rate;
        if (_isExcluded[address(this)]) _tOwned[address(this)] += tLiquidity;
        _rTotal -= tFee * rate;
        _tFeeTotal += tFee;
        if (!takeFee) restoreAllFee();
        emit Transfer(from, to, tTransferAmount);
    }
}
